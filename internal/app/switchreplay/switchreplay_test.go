package switchreplay

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

var testdata = filepath.Join("..", "..", "..", "testdata")

// corpusOptions replays pcap as testdata/switch/regen.sh does.
func corpusOptions(pcap, out, expect string) Options {
	return Options{Pcap: pcap, Table: filepath.Join(testdata, "switch", "corpus-table.json"), Mode: "go",
		Out: out, Expect: expect, Port: "host", UDPPort: 8855,
		PortAddrs: []string{"host=02:5e:00:00:00:01/10.255.0.1", "gpu=02:5e:00:00:00:02/10.255.0.2"}}
}

func run(o Options) (string, error) {
	var buf bytes.Buffer
	err := Run(o, &buf)
	return buf.String(), err
}

// TestMatchesExpected replays the corpus through the Go path and checks
// the committed expected outputs, and that a wrong expectation fails.
func TestMatchesExpected(t *testing.T) {
	t.Parallel()
	caps, _ := filepath.Glob(filepath.Join(testdata, "pcap", "*.pcap*"))
	if len(caps) == 0 {
		t.Fatal("the committed replay corpus testdata/pcap is missing")
	}
	for _, c := range caps {
		exp := filepath.Join(testdata, "switch", "expected", filepath.Base(c)+".out.pcap")
		out, err := run(corpusOptions(c, filepath.Join(t.TempDir(), "out.pcap"), exp))
		if err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
		if !strings.Contains(out, "output matches") {
			t.Fatalf("%s: %s", c, out)
		}
	}
	// Expecting another capture's output must fail.
	_, err := run(corpusOptions(filepath.Join(testdata, "pcap", "dxpu-eth.pcap"), "", filepath.Join(testdata, "switch", "expected", "dxpu-udp.pcap.out.pcap")))
	if !errors.Is(err, apperr.ErrFailed) || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("mismatch: %v", err)
	}
}

func TestBadOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, mode, addr, want string }{
		{"mode", "ebpf", "", "--mode"},
		{"port-addr", "go", "nosuch=02:00:00:00:00:01", "--port-addr"},
		{"port-addr-ip", "go", "host=02:00:00:00:00:01/::1", "IPv4"},
	} {
		o := Options{Pcap: "x.pcap", Table: filepath.Join(testdata, "switch", "corpus-table.json"), Mode: tc.mode}
		if tc.addr != "" {
			o.PortAddrs = []string{tc.addr}
		}
		_, err := run(o)
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
