package apperr

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestKinds(t *testing.T) {
	t.Parallel()
	base := fmt.Errorf("--rtt: %w", io.EOF)
	u := Usage(base)
	if !errors.Is(u, ErrUsage) || errors.Is(u, ErrFailed) || !errors.Is(u, io.EOF) || u.Error() != base.Error() {
		t.Fatalf("Usage: %v (usage %v, failed %v, cause kept %v)", u, errors.Is(u, ErrUsage), errors.Is(u, ErrFailed), errors.Is(u, io.EOF))
	}
	f := fmt.Errorf("bench: %w", Failed(base))
	if !errors.Is(f, ErrFailed) || errors.Is(f, ErrUsage) {
		t.Fatalf("wrapped Failed: %v", f)
	}
	if Usage(nil) != nil || Failed(nil) != nil {
		t.Fatal("nil error marked")
	}
}
