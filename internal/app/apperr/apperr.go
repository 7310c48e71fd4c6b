// Package apperr holds the two kinds of failure a product reports beyond a
// plain error, so that the command line can map them to exit statuses
// without knowing the product: ErrUsage (the options or the set-up were
// wrong: nothing ran) and ErrFailed (it ran, but some input was bad or a
// check failed). Any other error is the command's to classify.
package apperr

import "errors"

var (
	// ErrUsage marks errors in the options or set-up: exit status 2.
	ErrUsage = errors.New("usage error")
	// ErrFailed marks a run that completed with bad input or a failed
	// check: exit status 1.
	ErrFailed = errors.New("run failed")
)

// kindError carries err under a kind without changing its message.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string        { return e.err.Error() }
func (e *kindError) Unwrap() error        { return e.err }
func (e *kindError) Is(target error) bool { return target == e.kind }

// Usage marks err as a usage error (nil stays nil).
func Usage(err error) error { return mark(ErrUsage, err) }

// Failed marks err as a failed run (nil stays nil).
func Failed(err error) error { return mark(ErrFailed, err) }

func mark(kind, err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: kind, err: err}
}
