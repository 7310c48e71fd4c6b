package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestSwitchTableFileReloads runs `dxpu switch --mode udp --table FILE` as
// shipped (its own ports only, the table watch as it is) and rewrites the
// file: the new version comes into force (dxpu_switch_table_version on
// /metrics, and the log); an unusable file is logged naming it, and the
// table in force stays; the next good file is taken.
func TestSwitchTableFileReloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "table.json")
	mtime := time.Now().Add(-time.Hour)
	// A whole file renamed into place, with an mtime of its own (the
	// clock's granularity may give two quick writes the same one).
	write := func(data []byte) {
		t.Helper()
		tmp := filepath.Join(dir, "table.new")
		mtime = mtime.Add(time.Second)
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	table := func(version uint64, pairs int) []byte {
		tb := switchtest.Table()
		tb.Version, tb.Pairs = version, tb.Pairs[:pairs]
		b, err := json.Marshal(tb)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write(table(1, 4))
	_, log := daemon(t, "switch", "--mode", "udp", "--table", path, "--udp-listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0")
	urlRe := regexp.MustCompile(`msg="switch: metrics" url=(\S+)`)
	var url string
	waitfor.Until(t, "the switch's metrics address in its log", func() bool {
		if m := urlRe.FindStringSubmatch(log.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	version := func() string {
		resp, err := http.Get(url)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, "dxpu_switch_table_version "); ok {
				return v
			}
		}
		return "missing"
	}
	inForce := func(v, pairs string) {
		t.Helper()
		line := `msg="switch: table in force" version=` + v + " pairs=" + pairs
		waitfor.Until(t, "table version "+v+" in force", func() bool {
			return version() == v && strings.Contains(log.String(), line)
		})
	}
	// A UDP switch leaves out the pairs with an endpoint without an IP
	// (switchtest.Table's first and last), one warning each.
	inForce("1", "2")
	if n := strings.Count(log.String(), `msg="switch: pair not installed"`); n != 2 {
		t.Errorf("%d pairs not installed logged for version 1, want 2 (ids 1 and 4: no IP):\n%s", n, log.String())
	}

	write(table(2, 2))
	inForce("2", "1")

	write([]byte(`{"version": 3, "pairs": [`))
	unusable := "table file changed but is unusable; keeping the table in force"
	waitfor.Until(t, "the unusable file logged", func() bool { return strings.Contains(log.String(), unusable) })
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, unusable) && (!strings.HasPrefix(l, "time=") || !strings.Contains(l, "level=ERROR") ||
			!strings.Contains(l, path+": line 1 col 25: unexpected end of JSON input")) {
			t.Errorf("logged %q; want an error naming %s and what is wrong in it", l, path)
		}
	}
	if v := version(); v != "2" {
		t.Errorf("with an unusable table file: table version %s in force, want 2 kept", v)
	}

	write(table(4, 3))
	inForce("4", "2")
	if n := strings.Count(log.String(), unusable); n != 1 {
		t.Errorf("the unusable file logged %d times, want once", n)
	}
}
