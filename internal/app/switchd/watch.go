package switchd

import (
	"context"
	"log/slog"
	"os"
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

// WatchManager long-polls the manager's table and applies every new valid
// version, backing off while the manager is unreachable, until ctx ends. A nil
// log discards.
func WatchManager(ctx context.Context, c *ctlclient.Client, apply func(*table.Table), log *slog.Logger) {
	log = orDiscard(log)
	var version uint64
	have := false
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
				return
			}
			log.Warn("switch: manager unreachable; keeping the table in force", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		if have && t.Version == version {
			continue
		}
		if err := t.Validate(); err != nil {
			log.Error("switch: manager sent an invalid table; keeping the table in force", "version", t.Version, "err", err)
			version, have = t.Version, true
			continue
		}
		apply(&t)
		version, have = t.Version, true
	}
}
