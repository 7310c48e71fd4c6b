package switchd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/app/jsonfile"
)

// orDiscard returns log, or a logger that drops everything for nil.
func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// WatchTableFile re-reads the table when the file's modification time or
// size changes (checked every interval) and applies it, until ctx ends. An
// unusable file keeps the table in force. A nil log discards.
func WatchTableFile(ctx context.Context, path string, interval time.Duration, apply func(*table.Table), log *slog.Logger) {
	log = orDiscard(log)
	st, _ := os.Stat(path)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cur, err := os.Stat(path)
		if err != nil || st != nil && cur.ModTime().Equal(st.ModTime()) && cur.Size() == st.Size() {
			continue
		}
		st = cur
		t, err := switching.LoadTable(path)
		if err != nil {
			log.Error("switch: table file changed but is unusable; keeping the table in force", "err", jsonfile.ExplainFile(err, path, switching.TableFileForm))
			continue
		}
		apply(t)
	}
}

// ErrTokenRefused: the manager refused the switch's token at the first
// answer it gave (401 or 403), a configuration to fix, not an outage.
var ErrTokenRefused = errors.New("the manager refused the switch's token (--token-file, or $DXPU_TOKEN)")

// WatchManager long-polls the manager's table and applies every new valid
// version, backing off while the manager is unreachable or refuses the
// switch's token, until ctx ends (then it returns nil). When the first
// answer the manager gives is a refusal of the token it returns
// ErrTokenRefused: a switch started with the wrong token fails at once,
// for its supervisor to show; a refusal after that (a token rotated in the
// manager) is logged and waited out. A nil log discards.
func WatchManager(ctx context.Context, c *ctlclient.Client, apply func(*table.Table), log *slog.Logger) error {
	log = orDiscard(log)
	answered := false // the manager answered a request with a table
	var version uint64
	have := false      // a version was fetched (valid or not)
	installed := false // a table was handed to apply: version installedV
	var installedV uint64
	backoff := time.Second
	for ctx.Err() == nil {
		var t table.Table
		var err error
		if !have {
			t, err = c.Table(ctx)
		} else {
			t, err = c.WatchTable(ctx, version, 30*time.Second)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			logWatchError(log, err, installed, installedV, backoff)
			if refused(err) && !answered {
				return fmt.Errorf("switch: %w: %w", ErrTokenRefused, err)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = nextBackoff(backoff)
			continue
		}
		backoff, answered = time.Second, true
		if have && t.Version == version {
			continue
		}
		if err := t.Validate(); err != nil {
			log.Error("switch: manager sent an invalid table; "+inForce(installed, installedV), "version", t.Version, "err", err)
			version, have = t.Version, true
			continue
		}
		apply(&t)
		version, have, installed, installedV = t.Version, true, true, t.Version
	}
	return nil
}

// maxWatchBackoff bounds the wait between two failed table requests: a
// manager back after an outage is found within it.
const maxWatchBackoff = 30 * time.Second

// nextBackoff doubles the wait after a failed table request, up to
// maxWatchBackoff.
func nextBackoff(b time.Duration) time.Duration { return min(2*b, maxWatchBackoff) }

// inForce says what the switch forwards by while it cannot take a new
// table: the last one installed, or nothing yet.
func inForce(installed bool, version uint64) string {
	if !installed {
		return "no table installed yet"
	}
	return "keeping table version " + strconv.FormatUint(version, 10) + " in force"
}

// logWatchError logs a failed table request, once per retry. A 401 or 403
// means the manager was reached and refused the token: an error for the
// operator to fix, not an outage to wait out (the switch still retries,
// as a token may be rotated in the manager).
func logWatchError(log *slog.Logger, err error, installed bool, version uint64, retry time.Duration) {
	state := inForce(installed, version)
	var ae *ctlclient.APIError
	switch {
	case refused(err):
		log.Error("switch: the manager refused the switch's token (--token-file, or $DXPU_TOKEN): give it the manager's "+
			"read-only or admin token; "+state, "err", err, "retry_in", retry)
	case errors.As(err, &ae):
		log.Warn("switch: the manager failed the table request; "+state, "err", err, "retry_in", retry)
	default:
		log.Warn("switch: manager unreachable; "+state, "err", err, "retry_in", retry)
	}
}

// refused reports whether the manager answered err's request by refusing
// its token (401, or 403 for a token without the right).
func refused(err error) bool {
	var ae *ctlclient.APIError
	return errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden)
}
