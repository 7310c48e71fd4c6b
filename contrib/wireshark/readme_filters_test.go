package wireshark

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeWireshark returns the text of README.md's Wireshark section
// outside its shell blocks.
func readmeWireshark(t *testing.T) string {
	t.Helper()
	md, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(md), "\n#### Wireshark\n")
	if !ok {
		t.Fatal("README.md has no Wireshark section")
	}
	if i := strings.Index(sec, "\n#"); i >= 0 {
		sec = sec[:i]
	}
	return regexp.MustCompile("(?s)```.*?```").ReplaceAllString(sec, "")
}

// tsharkCount runs tshark with the dissector and -Y filter over capture
// and returns how many frames it keeps, failing on a filter tshark
// refuses.
func tsharkCount(t *testing.T, tshark, capture, filter string) int {
	t.Helper()
	script, err := filepath.Abs(dissectorPath)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), tshark, "-n", "-X", "lua_script:"+script, "-r", capture, "-Y", filter, "-T", "fields", "-e", "frame.number")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("README filter %q: tshark refuses it: %v\n%s", filter, err, stderr.Bytes())
		return -1
	}
	return len(strings.Fields(stdout.String()))
}

// TestREADMEFilters: the display filters README.md's Wireshark section
// names are filters tshark takes, and each row of its table keeps the
// frames it says of the capture it names. The README once offered
// dxpu.type == 5 and dxpu.tlp.tag == 0x105 (no frame of mix.pcap) and
// dxpu.expert.* (not a filter).
func TestREADMEFilters(t *testing.T) {
	t.Parallel()
	tshark := tsharkPath(t)
	if tshark == "" {
		return
	}
	sec := readmeWireshark(t)
	mix := filepath.Join("..", "..", "testdata", "pcap", "mix.pcap")
	code := regexp.MustCompile("`([^`]+)`")
	filterLike := regexp.MustCompile(`^(dxpu|nettlp|_ws)(\.[a-z0-9_]+)*( .*)?$`)
	row := regexp.MustCompile(`(?m)^\| (.+?) \|.*\| (\d+) of (testdata/\S+) \|$`)
	checked := map[string]bool{}
	rows := 0
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		rows++
		want, _ := strconv.Atoi(m[2])
		capture := filepath.Join("..", "..", m[3])
		for _, f := range code.FindAllStringSubmatch(m[1], -1) {
			checked[f[1]] = true
			if got := tsharkCount(t, tshark, capture, f[1]); got != want {
				t.Errorf("README: %q keeps %d frames of %s, the README says %d", f[1], got, m[3], want)
			}
		}
	}
	if rows < 5 {
		t.Errorf("README's Wireshark section has %d rows of filters with their frames, want its table", rows)
	}
	// The rest, named in passing, must at least be filters.
	for _, m := range code.FindAllStringSubmatch(sec, -1) {
		if f := m[1]; filterLike.MatchString(f) && !checked[f] {
			checked[f] = true
			tsharkCount(t, tshark, mix, f)
		}
		if strings.Contains(m[1], "*") {
			t.Errorf("README: %q is not a display filter (tshark has no wildcards)", m[1])
		}
	}
}
