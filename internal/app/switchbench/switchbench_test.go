package switchbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// TestGoDecision measures the Go figure only: a positive time per frame,
// no allocation, in the text and JSON reports.
func TestGoDecision(t *testing.T) {
	t.Parallel()
	o := Options{Repeat: 1, Rounds: 1, FrameBytes: 128, NoXDP: true, GoTime: 20 * time.Millisecond}
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

// TestBadOptions: the flag that is wrong is named, with its value;
// --frame-bytes must leave room for the headers and one TLP of whole DWs
// within the veths' MTU.
func TestBadOptions(t *testing.T) {
	t.Parallel()
	for want, o := range map[string]Options{
		"--repeat 0: must be positive":                         {Repeat: 0, Rounds: 1, FrameBytes: 128},
		"--rounds 0: must be positive":                         {Repeat: 1, Rounds: 0, FrameBytes: 128},
		"--frame-bytes 0: want a multiple of 4 in 68..1512":    {Repeat: 1, Rounds: 1},
		"--frame-bytes 64: want a multiple of 4 in 68..1512":   {Repeat: 1, Rounds: 1, FrameBytes: 64},
		"--frame-bytes 130: want a multiple of 4 in 68..1512":  {Repeat: 1, Rounds: 1, FrameBytes: 130},
		"--frame-bytes 1516: want a multiple of 4 in 68..1512": {Repeat: 1, Rounds: 1, FrameBytes: 1516},
		"--frame-bytes -1: want a multiple of 4 in 68..1512":   {Repeat: 1, Rounds: 1, FrameBytes: -1},
	} {
		if err := Run(o, &bytes.Buffer{}); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want a usage error saying %q", o, err, want)
		}
	}
}

// TestUserspaceErrorJoined: the reasons the userspace figures are
// missing are joined by "; ", with none trailing, in the JSON string and
// the text line. (A frame size BenchUserspace refuses makes both drivers
// fail, with root or without.)
func TestUserspaceErrorJoined(t *testing.T) {
	t.Parallel()
	var rep Report
	measureXDP(&rep, Options{Repeat: 1, Rounds: 1, Duration: time.Millisecond, FrameBytes: 10})
	if !strings.HasPrefix(rep.UserspaceError, "packet: ") || !strings.Contains(rep.UserspaceError, "; afxdp: ") || strings.HasSuffix(rep.UserspaceError, "; ") {
		t.Errorf("userspace_error %q: want \"packet: ...; afxdp: ...\"", rep.UserspaceError)
	}
	var out bytes.Buffer
	rep.print(&out)
	if strings.Contains(out.String(), "; \n") {
		t.Errorf("text ends a line with \"; \":\n%s", out.String())
	}
}
