package managerd

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
)

// serveLog is the daemon's JSON log; it hands over the advertised URL.
type serveLog struct {
	mu   sync.Mutex
	buf  []byte
	urls chan string
}

func (w *serveLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		var line struct {
			Msg       string `json:"msg"`
			Advertise string `json:"advertise"`
		}
		if json.Unmarshal(w.buf[:i], &line) == nil && line.Msg == "manager serving" {
			select {
			case w.urls <- line.Advertise:
			default:
			}
		}
		w.buf = w.buf[i+1:]
	}
}

// daemon is Run in this process.
type daemon struct {
	base  string
	admin string
	stop  func() error // ends the run and returns Run's error
}

// startDaemon runs the daemon with o in this process (an admin token file
// made for it unless o names one or NoAuth) and waits until it serves.
func startDaemon(t *testing.T, o Options) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{}
	if o.TokenFile == "" && !o.NoAuth {
		o.TokenFile = filepath.Join(dir, "admin.tok")
		tok, err := manager.CreateTokenFile(o.TokenFile)
		if err != nil {
			t.Fatal(err)
		}
		d.admin = tok
	} else if o.TokenFile != "" {
		tok, err := manager.LoadTokenFile(o.TokenFile)
		if err != nil {
			t.Fatal(err)
		}
		d.admin = tok
	}
	if o.Store == "" {
		o.Store = filepath.Join(dir, "m.db")
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.MaxConns == 0 {
		o.MaxConns = 16
	}
	if o.ReconcileInterval == 0 {
		o.ReconcileInterval = 30 * time.Second
	}
	o.EtcdPrefix, o.LeaseTTL = "/dxpu/", 3
	lw := &serveLog{urls: make(chan string, 1)}
	o.Log = slog.New(slog.NewJSONHandler(lw, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	var once sync.Once
	var runErr error
	d.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("Run did not return 30s after its context ended")
			}
		})
		return runErr
	}
	t.Cleanup(func() { d.stop() })
	select {
	case d.base = <-lw.urls:
	case err := <-done:
		cancel()
		t.Fatalf("Run ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not serve within 30s")
	}
	return d
}
