package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/syncbuf"
)

// noEnv is an empty environment: tests must not see the process's
// DXPU_* variables.
func noEnv(string) string { return "" }

// execute runs one command line in a command tree of its own over ctx and
// returns its stdout, stderr and error.
func execute(ctx context.Context, stdin string, stderr *syncbuf.Buffer, args ...string) (string, error) {
	var out strings.Builder
	e := newEnv(strings.NewReader(stdin), &out, stderr, args, noEnv)
	err := executeRoot(ctx, newRootCmd(e), args)
	return out.String(), err
}

// runDxpu runs one command line under a deadline (a daemon whose checks
// regress stops there and the test fails, instead of hanging) and
// returns its stdout, stderr and error.
func runDxpu(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	// No deadline of its own: a loaded machine makes a command slow, not
	// wrong; go test -timeout ends one that hangs.
	var errb syncbuf.Buffer
	out, err := execute(t.Context(), stdin, &errb, args...)
	t.Logf("dxpu %v: %s%s(err %v)", args, out, errb.String(), err)
	return out, errb.String(), err
}

// TestExitStatus: run prints the error after "dxpu:" on stderr and maps it
// to the exit status: 1 for bad input, 2 for usage and I/O errors.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	// A manager for ctl: a parameter it refuses (400) is a usage error,
	// a refusal of the call itself (404) a failed run.
	m, err := manager.New(manager.Config{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctl := []string{"ctl", "--manager", srv.URL, "--token-file", tok}
	for _, tc := range []struct {
		args       []string
		stdin      string
		code       int
		stdout     string
		stderrText string
	}{
		{[]string{"tlp", "decode"}, "00000001 0100050f fedc0010", 0, `"kind":"MRd"`, ""},
		{[]string{"tlp", "decode"}, "zz", 1, `"rule":"hex"`, "dxpu: tlp decode: 1 of 1 TLPs did not decode"},
		{[]string{"tlp", "encode", "extra"}, "", 2, "", `dxpu: tlp encode: takes no operands, got "extra"`},
		{[]string{"tlp", "decode", "--pcap", "x.pcap", "0000"}, "", 2, "", "dxpu: give hex TLPs or --pcap, not both"},
		{[]string{"pcap", "info", "/nonexistent.pcap"}, "", 2, "", "dxpu: "},
		{[]string{"pcap", "generate", "--out", "x", "--kind", "Foo"}, "", 2, "", "dxpu: generate: --kind: unknown TLP kind"},
		{[]string{"model"}, "", 2, "", "dxpu: model: give at least one --trace FILE"},
		// Flags given wrong are usage errors, exit 2 (new-user trial: these
		// exited 1, or --sweep= was ignored).
		{[]string{"model", "--profile", ".", "../../testdata/traces/alexnet-forward-a100.json.gz"}, "", 2, "", "dxpu: --profile .: a directory: a fabric profile is a file"},
		{[]string{"model", "--sweep=", "../../testdata/traces/alexnet-forward-a100.json.gz"}, "", 2, "", "dxpu: model: --sweep= names no RTT"},
		{[]string{"bridge", "--role", "gpu", "--pcie", "memory", "--insecure-no-keys", "--listen", "127.0.0.1:0", "--peer", "127.0.0.1:9", "--metrics", "bogus"},
			"", 2, "", `dxpu: --metrics "bogus": want HOST:PORT (address bogus: missing port in address)`},
		// The buffers in TLPs, refused before anything starts (neither
		// daemon had a flag for them).
		{[]string{"bridge", "--window", "0"}, "", 2, "", "dxpu: --window 0: want 1..32768 TLPs"},
		{[]string{"bridge", "--window", "40000"}, "", 2, "", "dxpu: --window 40000: want 1..32768 TLPs"},
		{[]string{"bridge", "--credits", "-1"}, "", 2, "", "dxpu: --credits -1: want 1..32768 TLPs per class"},
		{[]string{"bridge", "agent", "--window", "0"}, "", 2, "", "dxpu: --window 0: want 1..32768 TLPs"},
		{[]string{"bridge", "agent", "--window", "40000"}, "", 2, "", "dxpu: --window 40000: want 1..32768 TLPs"},
		{[]string{"bridge", "agent", "--credits", "-1"}, "", 2, "", "dxpu: --credits -1: want 1..32768 TLPs per class"},
		// An empty address is refused, not every address on a random port
		// (second new-user trial).
		{[]string{"manager", "--listen=", "--no-auth"}, "", 2, "", `dxpu: --listen "": want HOST:PORT (missing port in address)`},
		{[]string{"switch", "--mode", "udp", "--udp-listen=", "--table", "../../testdata/switch/corpus-table.json"}, "", 2, "", `dxpu: --udp-listen "": want HOST:PORT`},
		// Refused before the relay starts and logs that it did.
		{[]string{"switch", "--mode", "udp", "--udp-listen", "127.0.0.1:0", "--table", "../../README.md"}, "", 2, "", "dxpu: ../../README.md: line 1 col 1: invalid character '#'"},
		{[]string{"pcap", "unseal", "a.pcap", "b.pcap"}, "", 2, "", "dxpu: unseal: --key-log, IN and OUT are required"},
		{[]string{"pcap", "unseal", "--key-log", "/nonexistent.log", "a.pcap", "b.pcap"}, "", 2, "", "dxpu: unseal: --key-log /nonexistent.log: no such file or directory"},
		{[]string{"pcap", "capture", "--out", "x.pcap"}, "", 2, "", "dxpu: capture: --interface and --out are required"},
		{[]string{"replay", "--pcap", "x"}, "", 2, "", "dxpu: replay: --pcap and --table are required"},
		{[]string{"bench", "switch", "--repeat", "0"}, "", 2, "", "--repeat 0: must be positive"},
		{[]string{"demo", "--link-gbps", "0"}, "", 2, "", "dxpu: --link-gbps 0: want a number of Gbit/s above 0, at most 10000"},
		{[]string{"demo", "--gbit", "0"}, "", 2, "", "--link-gbps 0: want a number of Gbit/s above 0"}, // the old spelling still works
		{[]string{"ctl", "box", ""}, "", 2, "", `dxpu: ctl box "": want a box ID, or none to list every box`},
		{[]string{"ctl", "frobnicate"}, "", 2, "", `unknown command "frobnicate" for "dxpu ctl"; want one of alloc, box`},
		{append(ctl, "gpu", "--state", "bogus"), "", 2, "", `dxpu: bad_request (HTTP 400): parameter state "bogus": want free, used or unhealthy`},
		{append(ctl, "free", "a-nosuch"), "", 1, "", "dxpu: free a-nosuch: not_found (HTTP 404)"},
		{append(ctl, "gpu", "--state", "free"), "", 0, "GPU", ""},
		// A key twice, or in another case, is refused where the file is
		// read, as the API's strict decoding refuses it (strictjson):
		// ctl's re-encoding took them (new-user trial).
		{append(ctl, "box", "add", "-"), `{"id":"b4","id":"b5","bridge":{"switch_port":"p4","mac":"02:00:00:00:01:04"}}`, 2, "", `dxpu: stdin: line 1 col 12: duplicate field "id"`},
		{append(ctl, "box", "add", "-"), `{"ID":"b6","bridge":{"switch_port":"p6","mac":"02:00:00:00:01:06"}}`, 2, "", `dxpu: stdin: line 1 col 2: field "ID": field names are case-sensitive; want "id"`},
		{append(ctl, "host", "add", "-"), `{"id":"h7","ports":32,"bridge":{"switch_port":"p7","MAC":"02:00:00:00:01:07"}}`, 2, "", `dxpu: stdin: line 1 col 52: field "bridge.MAC": field names are case-sensitive; want "bridge.mac"`},
		{append(ctl, "host", "add", "-"), `{"id":"h8","ports":32,"ports":64,"bridge":{"switch_port":"p8","mac":"02:00:00:00:01:08"}}`, 2, "", `dxpu: stdin: line 1 col 23: duplicate field "ports"`},
		// A bridge driven by dxpu bridge agent speaks UDP: without
		// bridge.ip its pairs' table entries had no IP, and a UDP switch
		// dropped their traffic.
		{append(ctl, "box", "add", "-"), `{"id":"b9","agent_url":"https://10.1.0.9:7701","bridge":{"switch_port":"p9","mac":"02:00:00:00:01:09"}}`, 2, "",
			"dxpu: invalid_argument (HTTP 400): bridge.ip is required with agent_url: dxpu bridge agent speaks UDP, at bridge.ip:udp_port (udp_port 8855 when left out)"},
		{append(ctl, "host", "add", "-"), `{"id":"h9","ports":32,"agent_url":"https://10.2.0.9:7701","bridge":{"switch_port":"p10","mac":"02:00:00:00:01:0a","udp_port":8855}}`, 2, "",
			"dxpu: invalid_argument (HTTP 400): bridge.ip is required with agent_url"},
		{append(ctl, "box", "add", "-"), `{"id":"b9","bridge":{"switch_port":"p9","mac":"02:00:00:00:01:09"}}`, 0, "b9", ""},
		// Cobra's completion alone printed its help and exited 0.
		{[]string{"completion"}, "", 2, "", "dxpu: completion: name a shell: bash, fish, powershell or zsh; usage: dxpu completion SHELL"},
		{[]string{"pcap", "conver", "--in", "x"}, "", 2, "", "did you mean convert?"},
		{[]string{"bench", "frob"}, "", 2, "", `unknown command "frob" for "dxpu bench"`},
		{[]string{"bench", "lnk"}, "", 2, "", "did you mean link?"},
		{[]string{"bench"}, "", 0, "Measure dxpu components", ""},
		{[]string{"model", "--trace", "x.json", "--target", "200%"}, "", 2, "", "--target 200%: want a percentage above 0 and at most 100"},
		{[]string{"model", "--trace", "x.json", "--rtt", "5us", "--added-rtt", "6us"}, "", 2, "", "not both"},
		{[]string{"model", "--trace", "x.json", "--rtt", "5"}, "", 2, "", "missing unit"},
		{[]string{"model", "--trace", "x.json", "--link-gbps", "-1"}, "", 2, "", "--link-gbps -1: want a number of Gbit/s from 0 (no limit) up to 10000"},
		{[]string{"bench", "link", "--write-size", "-5"}, "", 2, "", `invalid argument "-5" for "--write-size" flag: want a byte count like 64M, 4096 or 0x1000`},
		{[]string{"bench", "link", "--write-size", "6"}, "", 2, "", "--write-size 6: want a multiple of 4"},
		{[]string{"bench", "link", "--outstanding", "0"}, "", 2, "", "--outstanding 0: want 1..768 reads"},
		{[]string{"bench", "link", "--duration", "-1s"}, "", 2, "", "--duration -1s: must be positive"},
		{[]string{"bench", "link", "--link-gbps", "-3"}, "", 2, "", "--link-gbps -3"},
		{[]string{"bench", "link", "--raw-for", "-1s", "--json"}, "", 2, "", "--raw-for -1s: must not be negative"},
		{[]string{"bench", "scale", "--loopback", "--readers", "0"}, "", 2, "", "--readers 0: must be positive"},
		{[]string{"bench", "scale", "--loopback", "--duration", "-1s"}, "", 2, "", "--duration -1s: must be positive"},
		{[]string{"bench", "scale", "--loopback", "--mtu", "0"}, "", 2, "", "--mtu 0: must be positive"},
		{[]string{"bench", "scale", "--loopback", "--mtu", "10", "--json"}, "", 2, "", "--mtu 10: bridge: bad config: MTU: 10 cannot carry one"},
		{[]string{"bench", "e2e", "--loopback", "--copies", "0", "--json"}, "", 2, "", "--copies 0: must be positive"},
		{[]string{"bench", "e2e", "--loopback", "--spin", "-1ms"}, "", 2, "", "--spin -1ms: must not be negative"},
		{[]string{"bench", "fabric", "--link-gbps", "0"}, "", 2, "", "--link-gbps 0: want a number of Gbit/s from 0.001 up to 10000"},
		{[]string{"bench", "manager", "--gpus", "100"}, "", 2, "", "--gpus 100: want a multiple of 8"},
		{[]string{"bench", "manager", "--store", "redis"}, "", 2, "", `--store "redis": want bbolt, etcd or memory`},
		{[]string{"bench", "scale", "--loopback", "--pairs", "0"}, "", 2, "", `--pairs "0": want positive integers`},
		{[]string{"bench", "scale", "--loopback", "--scenarios", "sweep,fast"}, "", 2, "", `--scenarios "fast": want sweep, borrow, lend or switch`},
		{[]string{"bench", "scale", "--loopback", "--scenarios", "switch"}, "", 2, "", "no scenario to run (switch needs namespaces"},
		{[]string{"bench", "scale", "--loopback", "--read-bytes", "4097"}, "", 2, "", "--read-bytes 4097: want a multiple of 4"},
		// A binary that does not start is refused before anything runs;
		// bridges that start and die make a run that failed.
		{[]string{"bench", "scale", "--loopback", "--bridge-binary", "/nonexistent/dxpu"}, "", 2, "", "dxpu: --bridge-binary /nonexistent/dxpu: no such file"},
		{[]string{"bench", "scale", "--loopback", "--bridge-binary", "/etc/passwd"}, "", 2, "", "dxpu: --bridge-binary /etc/passwd: not an executable file"},
		{[]string{"bench", "scale", "--loopback", "--pairs", "1", "--duration", "100ms", "--bridge-binary", "/bin/false"}, "", 1, "",
			"side (/bin/false bridge) exited (exit status 1); its stderr: no output"},
		{[]string{"help", "units", "extra"}, "", 2, "", `dxpu: help: "dxpu units" has no subcommands, got "extra"`},
		// A help topic and cobra's completion take no operands either:
		// `units extra` printed the topic, `completion extra` its help,
		// and both exited 0.
		{[]string{"units", "extra"}, "", 2, "", `dxpu: units: takes no operands, got "extra"; usage: dxpu help units`},
		{[]string{"units"}, "", 0, "One name and one unit for each quantity", ""},
		{[]string{"completion", "extra"}, "", 2, "", `dxpu: unknown command "extra" for "dxpu completion"`},
		{[]string{"completion", "bash", "extra"}, "", 2, "", `dxpu: completion bash: takes no operands, got "extra"`},
		{[]string{"bench", "fabric", "--sizes", "3"}, "", 2, "", "dxpu: --sizes: copy size 3: want a multiple of 4 in 4..4GiB"},
		{[]string{"pcap", "generate", "--out", "x", "--count", "0"}, "", 2, "", "--count 0: want at least 1 frame"},
		{[]string{"switch", "--mode", "udp"}, "", 2, "", "exactly one of --table and --manager"},
		// Not a URL, or contradictory, was taken (new-user trial; the
		// switch's flags: TestSwitchModeFlags).
		// 0 meant the default, although the messages say positive.
		{[]string{"manager", "--no-auth", "--listen", "127.0.0.1:0", "--store", "/nonexistent/m.db", "--degraded-after", "0"}, "", 2, "", "dxpu: --degraded-after 0s: must be positive"},
		{[]string{"manager", "--no-auth", "--listen", "127.0.0.1:0", "--store", "/nonexistent/m.db", "--unreachable-after", "0"}, "", 2, "", "dxpu: --unreachable-after 0s: must be positive"},
		{[]string{"manager", "--no-auth", "--listen", "127.0.0.1:0", "--store", "/nonexistent/m.db", "--max-anon-conns-per-client", "0"}, "", 2, "", "dxpu: --max-anon-conns-per-client 0: must be positive"},
		{[]string{"manager", "--no-auth", "--listen", "127.0.0.1:0", "--store", "/nonexistent/m.db", "--reconcile-interval", "0"}, "", 2, "", "dxpu: --reconcile-interval 0s: want a positive interval, or a negative one"},
		{[]string{"manager", "--no-auth", "--listen", "127.0.0.1:0", "--store", "/nonexistent/m.db", "--advertise", "notaurl"}, "", 2, "", `dxpu: --advertise "notaurl": want an http(s) URL`},
		{[]string{"manager", "--no-auth", "--listen", "127.0.0.1:0", "--store", "/nonexistent/m.db", "--read-token-file", "/nonexistent/tok"}, "", 2, "", "dxpu: --read-token-file and --no-auth exclude each other"},
		{[]string{"no-such-command"}, "", 2, "", "dxpu: unknown command"},
		// Unknown flags get the closest flags of their command, as unknown
		// commands get the closest commands.
		{[]string{"bench", "link", "--jsn"}, "", 2, "", `dxpu: unknown flag --jsn for "dxpu bench link"; did you mean --json?`},
		{[]string{"model", "--trce", "x.json"}, "", 2, "", "did you mean --trace?"},
		{[]string{"demo", "--bridg"}, "", 2, "", "did you mean --bridge?"},
		{[]string{"tlp", "decode", "--verbos"}, "", 2, "", "did you mean --verbose?"}, // inherited from the root
		{[]string{"model", "--zzzzzz"}, "", 2, "", `dxpu: unknown flag --zzzzzz for "dxpu model" (see 'dxpu model --help')`},
		// The root's help said man writes "into DIR", a DIR its usage line
		// had not named (third new-user trial).
		{[]string{"help"}, "", 0, "man         Write a man page (section 1) for every command into the directory of --dir\n", ""},
		// --out-udp-port 70000 got strconv's words, not the port's range
		// as --udp-port says it (third new-user trial).
		{[]string{"pcap", "unseal", "--key-log", "k.log", "--out-udp-port", "70000", "a.pcap", "b.pcap"}, "", 2, "",
			`dxpu: invalid argument "70000" for "--out-udp-port" flag: want a UDP port, 1..65535, or 0 to keep --udp-port`},
		{[]string{"pcap", "unseal", "--key-log", "k.log", "--out-udp-port", "-1", "a.pcap", "b.pcap"}, "", 2, "", "1..65535, or 0 to keep --udp-port"},
		// help's completion left out the help topics: `help u` completed
		// nothing (third new-user trial).
		{[]string{"__complete", "help", "u"}, "", 0, "units\tNames and units of flags and JSON keys", ""},
		{[]string{"__complete", "help", "pcap", "u"}, "", 0, "unseal\t", ""},
	} {
		var out, errb strings.Builder
		code := run(context.Background(), newEnv(strings.NewReader(tc.stdin), &out, &errb, tc.args, noEnv))
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errb.String(), tc.stderrText) {
			t.Errorf("dxpu %v: exit %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, out.String(), errb.String(), tc.code, tc.stdout, tc.stderrText)
		}
		// A usage error prints its one line (after a deprecated
		// spelling's notice) and no result.
		lines := 0
		for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
			if !strings.Contains(l, "is deprecated") {
				lines++
			}
		}
		if code == 2 && (out.Len() > 0 || lines != 1) {
			t.Errorf("dxpu %v: exit 2 with stdout %q and stderr %q: want one line on stderr only", tc.args, out.String(), errb.String())
		}
	}
}

// TestVerboseStaysInItsTree: --verbose sets the level of its own env's
// logger only, so commands run side by side do not share it.
func TestVerboseStaysInItsTree(t *testing.T) {
	t.Parallel()
	var out, a, b strings.Builder
	ea := newEnv(strings.NewReader(""), &out, &a, []string{"-v", "tlp", "decode", "00000001 0100050f fedc0010"}, noEnv)
	eb := newEnv(strings.NewReader(""), &out, &b, []string{"tlp", "decode", "00000001 0100050f fedc0010"}, noEnv)
	if run(context.Background(), ea) != 0 || run(context.Background(), eb) != 0 {
		t.Fatal("decode failed")
	}
	if !ea.log.Enabled(context.Background(), -4) || eb.log.Enabled(context.Background(), -4) {
		t.Errorf("debug enabled: with -v %v, without %v", ea.log.Enabled(context.Background(), -4), eb.log.Enabled(context.Background(), -4))
	}
}
