package switchbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// TestGoDecision measures the Go figure only: a positive time per frame,
// no allocation, in the text and JSON reports.
func TestGoDecision(t *testing.T) {
	t.Parallel()
	o := Options{Repeat: 1, Rounds: 1, NoXDP: true, GoTime: 20 * time.Millisecond}
	var out bytes.Buffer
	if err := Run(o, &out); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`go  decision +([0-9.]+) ns/frame, (\d+) allocs/frame\n`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no Go figure in %q", out.String())
	}
	if ns, _ := strconv.ParseFloat(m[1], 64); ns <= 0 || m[2] != "0" {
		t.Errorf("Go decision %s ns/frame, %s allocs/frame: want > 0 ns and no allocation", m[1], m[2])
	}
	o.JSON = true
	out.Reset()
	if err := Run(o, &out); err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.GoNsPerFrame <= 0 || rep.XDP != nil {
		t.Fatalf("JSON report %+v (%v):\n%s", rep, err, out.String())
	}
}

func TestBadOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{{Repeat: 0, Rounds: 1}, {Repeat: 1, Rounds: 0}} {
		if err := Run(o, &bytes.Buffer{}); !errors.Is(err, apperr.ErrUsage) {
			t.Errorf("%+v: %v, want a usage error", o, err)
		}
	}
}
