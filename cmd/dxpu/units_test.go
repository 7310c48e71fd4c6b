package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/bridge"
)

// TestBenchLinkVirtualDefaults: --virtual runs with its own defaults
// (2 ms of virtual time), and the JSON keys are snake_case with units:
// the bridge counters, the faults, srtt_us.
func TestBenchLinkVirtualDefaults(t *testing.T) {
	t.Parallel()
	out, _, err := runDxpu(t, "", "bench", "link", "--virtual", "--json", "--link-gbps", "10")
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	host, _ := r["host_counters"].(map[string]any)
	faults, _ := r["faults"].(map[string]any)
	if host["frames_sent"] == nil || host["srtt_us"] == nil || host["FramesSent"] != nil || faults["link_gbps"] != 10.0 {
		t.Errorf("keys: host_counters %v faults %v", host, faults)
	}
	var bad []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k != strings.ToLower(k) {
					bad = append(bad, prefix+k)
				}
				walk(prefix+k+".", x)
			}
		case []any:
			for _, x := range v {
				walk(prefix, x)
			}
		}
	}
	walk("", r)
	if len(bad) > 0 {
		t.Errorf("keys not snake_case: %v", bad)
	}
}

// TestLinkRateAliases: the old spellings of the link rate still set it.
func TestLinkRateAliases(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bench", "link", "--virtual", "--json", "--duration", "200us", "--bw", "10G"},
		{"bench", "link", "--virtual", "--json", "--duration", "200us", "--link-gbps", "10"},
	} {
		out, errText, err := runDxpu(t, "", args...)
		if deprecated := strings.Contains(errText, "--bw is deprecated: use --link-gbps"); deprecated != (args[len(args)-2] == "--bw") {
			t.Errorf("%v: stderr %q", args, errText)
		}
		var r struct {
			Faults struct {
				LinkGbps float64 `json:"link_gbps"`
			} `json:"faults"`
		}
		if err != nil || json.Unmarshal([]byte(out), &r) != nil || r.Faults.LinkGbps != 10 {
			t.Errorf("%v: link_gbps %v (%v)", args, r.Faults.LinkGbps, err)
		}
	}
}

// TestDemoJSONLines: demo --json prints one object per line.
func TestDemoJSONLines(t *testing.T) {
	t.Parallel()
	out, _, err := runDxpu(t, "", "demo", "--json", "--quiet", "--traces", t.TempDir(), "--link-gbps", "100")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row["workload"] == nil || row["added_rtt_us"] == nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no rows")
	}
}

// TestDemoLongRTT: demo takes every --rtt up to its limit of 1s. From
// about 30 ms on it failed ("hot-add ... configured 0 devices"): the
// emulated host gave a config read across the fabric 50 ms.
func TestDemoLongRTT(t *testing.T) {
	t.Parallel()
	out, _, err := runDxpu(t, "", "demo", "--json", "--quiet", "--traces", t.TempDir(), "--rtt", "1s")
	if err != nil {
		t.Fatal(err)
	}
	var row struct {
		AddedRTTus float64 `json:"added_rtt_us"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &row); err != nil || row.AddedRTTus < 1e6 {
		t.Fatalf("first row %+v (%v):\n%s", row, err, out)
	}
}

// TestJSONResultIndented: every command that prints one result object
// with --json prints it indented by two spaces, as bench link, conform
// and ctl do (bench e2e, bench fabric, bench scale, pcap info, vm demo and
// vm run printed one line); several objects stay JSON lines (pcap info of
// two captures here, demo in TestDemoJSONLines). bench scale:
// TestBenchScaleProcess.
func TestJSONResultIndented(t *testing.T) {
	t.Parallel()
	pcaps := []string{"../../testdata/pcap/dxpu-eth-vlan.pcap", "../../testdata/pcap/nettlp-vlan-snap128.pcap"}
	for _, args := range [][]string{
		{"bench", "fabric", "--sizes", "4K", "--json"},
		{"bench", "e2e", "--loopback", "--sizes", "64K,4K", "--samples", "20", "--copies", "1", "--link-for", "50ms", "--json"},
		{"pcap", "info", "--json", pcaps[0]},
	} {
		out, _, err := runDxpu(t, "", args...)
		var v map[string]any
		if err != nil || json.Unmarshal([]byte(out), &v) != nil || !strings.HasPrefix(out, "{\n  \"") || !strings.HasSuffix(out, "\n}\n") {
			t.Errorf("%v: %v: want one object indented by two spaces:\n%s", args, err, out)
		}
		// bench e2e's copies: an array in the order of --sizes, keys
		// with units (h2d_gbps and d2h_gbps were objects keyed by bytes).
		if args[1] == "e2e" {
			c, _ := v["copies"].([]any)
			if len(c) != 2 || v["h2d_gbps"] != nil || v["d2h_gbps"] != nil {
				t.Fatalf("bench e2e: copies %v, h2d_gbps %v: want 2 copies and no h2d_gbps beside them", v["copies"], v["h2d_gbps"])
			}
			for i, size := range []float64{64 << 10, 4 << 10} {
				if m, _ := c[i].(map[string]any); m["size_bytes"] != size || m["h2d_gbps"] == nil || m["d2h_gbps"] == nil {
					t.Errorf("bench e2e: copies[%d] %v: want size_bytes %v with h2d_gbps and d2h_gbps", i, c[i], size)
				}
			}
		}
	}
	// vm demo and vm run print theirs through env.printJSON.
	var out strings.Builder
	e := newEnv(strings.NewReader(""), &out, &out, nil, noEnv)
	if err := e.printJSON(struct {
		A int   `json:"a"`
		B []int `json:"b"`
	}{1, []int{2}}); err != nil || out.String() != "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}\n" {
		t.Errorf("printJSON: %q (%v)", out.String(), err)
	}

	text, _, err := runDxpu(t, "", append([]string{"pcap", "info", "--json"}, pcaps...)...)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		var v map[string]any
		if json.Unmarshal([]byte(l), &v) != nil || v["file"] != pcaps[i] {
			t.Errorf("pcap info --json of %d captures, line %d: %q: want one object per line", len(pcaps), i+1, l)
		}
	}
	if err != nil || len(lines) != len(pcaps) {
		t.Errorf("pcap info --json of %d captures: %d lines (%v)", len(pcaps), len(lines), err)
	}
}

// TestHelpUnits: the units topic names every shared flag.
func TestHelpUnits(t *testing.T) {
	t.Parallel()
	out, _, err := runDxpu(t, "", "help", "units")
	for _, want := range []string{"--rtt", "--added-rtt", "--link-gbps", "--tags", "--window", "--credits", "_gbps Gbit/s", "JSON lines"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("help units lacks %q (%v)", want, err)
		}
	}
}

// TestTagsDefaultEverywhere: every command with --tags defaults it to the
// same value.
func TestTagsDefaultEverywhere(t *testing.T) {
	t.Parallel()
	root := newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv))
	var seen int
	for _, c := range allCommands(root) {
		if f := c.Flags().Lookup("tags"); f != nil && f.Annotations[deprecatedFor] == nil {
			seen++
			if f.DefValue != "768" {
				t.Errorf("%s --tags defaults to %s", c.CommandPath(), f.DefValue)
			}
		}
		for _, name := range []string{"gbit", "bw"} {
			if f := c.Flags().Lookup(name); f != nil && (!f.Hidden || len(f.Annotations[deprecatedFor]) != 1) {
				t.Errorf("%s --%s is not a hidden deprecated alias", c.CommandPath(), name)
			}
		}
	}
	if seen < 2 {
		t.Errorf("--tags on %d commands", seen)
	}
}

// TestBufferFlagsEverywhere: --window is the TLPs in flight per direction
// and --credits the header credits per class, in every command that has
// them (bridge, bridge agent; bench link's --window): the same default as
// the library's, help in the same words, and the same refusal of a value
// outside 1..32768.
func TestBufferFlagsEverywhere(t *testing.T) {
	t.Parallel()
	root := newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv))
	seen := map[string]int{}
	for _, c := range allCommands(root) {
		for _, fl := range []struct {
			name, def, help, want string
		}{
			{"window", strconv.Itoa(bridge.DefaultWindow), "TLPs in flight per direction", "want 1..32768 TLPs"},
			{"credits", strconv.Itoa(bridge.DefaultHeaderCredits), "header credits each flow-control class", "want 1..32768 TLPs per class"},
		} {
			f := c.LocalFlags().Lookup(fl.name)
			if f == nil {
				continue
			}
			seen[fl.name]++
			if f.DefValue != fl.def || !strings.HasPrefix(f.Usage, fl.help) || f.Value.Type() != "int" {
				t.Errorf("%s --%s: %s flag, default %s, help %q; want an int, %s, %q...", c.CommandPath(), fl.name, f.Value.Type(), f.DefValue, f.Usage, fl.def, fl.help)
			}
			for _, v := range []string{"0", "32769"} {
				args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "dxpu")), "--"+fl.name, v)
				checkUsageError(t, args, "dxpu: --"+fl.name+" "+v+": "+fl.want)
			}
		}
	}
	if seen["window"] < 3 || seen["credits"] < 2 {
		t.Errorf("--window on %d commands, --credits on %d: want bridge, bridge agent (and bench link's --window)", seen["window"], seen["credits"])
	}
}

// allCommands lists c and every command below it.
func allCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, s := range c.Commands() {
		out = append(out, allCommands(s)...)
	}
	return out
}

// TestMicrosecondsSpelledUs: `dxpu help units` spells microseconds us,
// and so does every line people read: each command's help (Go writes a
// duration flag's default as 5µs), bench fabric's header, model's sweep,
// bench link's faults, and the JSON keys carry units (model's breakdown,
// bench link's duration_s).
func TestMicrosecondsSpelledUs(t *testing.T) {
	t.Parallel()
	root := newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv))
	for _, c := range allCommands(root) {
		if u := c.UsageString(); strings.Contains(u, "µ") {
			t.Errorf("%s --help spells µs:\n%s", c.CommandPath(), u)
		}
	}
	for _, args := range [][]string{
		{"bench", "fabric", "--rtt", "5us"},
		{"model", "--sweep", "--rtt", "5us", "../../testdata/emu/mlp-train-emu.json.gz"},
		{"bench", "link", "--virtual", "--delay", "5us", "--duration", "200us"},
	} {
		out, _, err := runDxpu(t, "", args...)
		if err != nil || strings.Contains(out, "µ") || !strings.Contains(out, "us") {
			t.Errorf("%v (%v): want us, never µs:\n%s", args, err, out)
		}
	}
	out, _, err := runDxpu(t, "", "model", "--json", "../../testdata/emu/mlp-train-emu.json.gz")
	var m struct {
		Breakdown map[string]float64 `json:"breakdown"`
	}
	if err != nil || json.Unmarshal([]byte(out), &m) != nil || len(m.Breakdown) == 0 {
		t.Fatalf("model --json: %v", err)
	}
	for k := range m.Breakdown {
		if !strings.HasSuffix(k, "_s") {
			t.Errorf("model breakdown key %q carries no unit", k)
		}
	}
	out, _, err = runDxpu(t, "", "bench", "link", "--virtual", "--json", "--duration", "200us")
	var l map[string]any
	if err != nil || json.Unmarshal([]byte(out), &l) != nil || l["duration_s"] == nil || l["seconds"] != nil {
		t.Errorf("bench link --json: duration_s %v, seconds %v (%v)", l["duration_s"], l["seconds"], err)
	}
}

// TestTagsRangeEverywhere: every command with --tags takes the same range,
// 1..768 (10-bit tags), and refuses beyond it with the same words (model
// took up to 1024 while bench fabric stopped at 768).
func TestTagsRangeEverywhere(t *testing.T) {
	t.Parallel()
	needs := map[string][]string{"dxpu model": {"--trace", "../../testdata/emu/mlp-train-emu.json.gz"}}
	root := newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv))
	seen := 0
	for _, c := range allCommands(root) {
		if f := c.Flags().Lookup("tags"); f == nil || f.Annotations[deprecatedFor] != nil {
			continue
		}
		seen++
		for _, v := range []string{"769", "0"} {
			args := append(append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "dxpu")), needs[c.CommandPath()]...), "--tags", v)
			checkUsageError(t, args, "dxpu: --tags "+v+": want 1..768")
		}
	}
	if seen < 2 {
		t.Errorf("--tags on %d commands", seen)
	}
}

// TestPcapEtherMTU: pcap generate's and convert's frame limit is
// --ether-mtu (the Ethernet payload; --mtu everywhere else is the dxpu
// frame). Their old --mtu still works, the same number, with one warning;
// both at once are refused.
func TestPcapEtherMTU(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gen := func(flag, out string) string {
		_, errText, err := runDxpu(t, "", "pcap", "generate", "--out", filepath.Join(dir, out), "--count", "20", "--max-dw", "256", flag, "9K")
		if err != nil {
			t.Fatalf("pcap generate %s 9K: %v", flag, err)
		}
		return errText
	}
	if warn := gen("--ether-mtu", "new.pcap"); warn != "" {
		t.Errorf("--ether-mtu: stderr %q", warn)
	}
	if warn := gen("--mtu", "old.pcap"); warn != "dxpu: --mtu is deprecated: use --ether-mtu (dxpu help units)\n" {
		t.Errorf("--mtu: stderr %q, want one deprecation line", warn)
	}
	a, errA := os.ReadFile(filepath.Join(dir, "new.pcap"))
	b, errB := os.ReadFile(filepath.Join(dir, "old.pcap"))
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("--mtu 9K and --ether-mtu 9K wrote different captures (%v, %v)", errA, errB)
	}
	in := filepath.Join(dir, "new.pcap")
	for _, args := range [][]string{
		{"pcap", "generate", "--out", filepath.Join(dir, "x.pcap"), "--ether-mtu", "9000", "--mtu", "9000"},
		{"pcap", "convert", "--in", in, "--out", filepath.Join(dir, "y.pcap"), "--to", "dxpu-udp", "--pack", "--mtu", "1500", "--ether-mtu", "1500"},
	} {
		checkUsageError(t, args, "--ether-mtu and --mtu: --mtu is the old spelling of --ether-mtu: give one")
	}
	root := newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv))
	for _, path := range [][]string{{"pcap", "generate"}, {"pcap", "convert"}} {
		c, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		if f := c.Flags().Lookup("ether-mtu"); f == nil || f.DefValue != "1500" || !c.Flags().Lookup("mtu").Hidden {
			t.Errorf("%v: --ether-mtu %v, --mtu hidden %v", path, f, c.Flags().Lookup("mtu").Hidden)
		}
	}
}
