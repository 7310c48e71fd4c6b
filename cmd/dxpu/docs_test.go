package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// The shell blocks of README.md and docs/*.md are run as written by
// TestDocsRun, each under a marker on the line right above its fence:
//
//	<!-- run -->                           run it, as anyone
//	<!-- run: NEED, ... -->                run it where the needs are met
//	                                       (root, loopback, tshark, qemu):
//	                                       through internal/privtest, so
//	                                       skipped without them and failed
//	                                       under DXPU_REQUIRE_PRIVILEGED=1
//	<!-- run: ...; until it succeeds -->   re-run until it exits 0 (it
//	                                       waits on daemons started above)
//	<!-- run: ...; pending: WHY -->        a product bug being fixed
//	                                       elsewhere: run only with
//	                                       DXPU_DOCS_PENDING=1; drop the
//	                                       clause once it is fixed
//	<!-- check: WHY -->                    not run (it needs hardware,
//	                                       machines or a network): WHY says
//	                                       what
//
// Every block, run or not, passes bash -n, and each dxpu command in it
// names a command that exists with flags it parses (TestDocsBlocks).

// docFiles are the markdown files whose shell blocks are checked, relative
// to the repository root. examples/README.md has its own markers (the
// machine each block runs on) and test.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, filepath.Join("docs", filepath.Base(d)))
	}
	return files
}

// repoRoot is the repository root from this package.
const repoRoot = "../.."

// docNeeds are the requirements a run marker may name, each a privtest gate.
var docNeeds = map[string]func(testing.TB){
	"root":     func(tb testing.TB) { privtest.NetNS(tb); privtest.BPF(tb) },
	"loopback": privtest.Loopback,
	"tshark":   func(tb testing.TB) { privtest.Tool(tb, "tshark") },
	"qemu": func(tb testing.TB) {
		privtest.Tool(tb, "qemu-system-x86_64")
		privtest.File(tb, "/boot/vmlinuz-*")
		privtest.File(tb, "/bin/busybox")
	},
}

// pendingEnv switches on the blocks marked pending.
const pendingEnv = "DXPU_DOCS_PENDING"

// docBlock is one fenced shell block.
type docBlock struct {
	file    string
	line    int    // of the opening fence
	section string // the heading above it
	key     string // file > section, #n for the n-th block of a section
	run     bool
	needs   []string
	until   bool
	pending string
	why     string // a check block's reason
	script  string
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var (
	markerRE   = regexp.MustCompile(`^<!-- (run|check)(?:(:|;) *(.*?))? *-->$`)
	shellFence = regexp.MustCompile("^```(sh|bash|shell|console)\\s*$")
)

// parseDocBlocks returns the shell blocks of md in order. A shell block
// without a valid marker right above it is an error: a block the test
// would silently pass over is how README commands broke.
func parseDocBlocks(file, md string) ([]docBlock, error) {
	var blocks []docBlock
	lines := strings.Split(md, "\n")
	section := "(top)"
	count := map[string]int{}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "#") {
			section = strings.TrimSpace(strings.TrimLeft(l, "#"))
			continue
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		shell := shellFence.MatchString(l)
		start := i
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: unterminated block", file, start+1)
		}
		if !shell {
			continue
		}
		b := docBlock{file: file, line: start + 1, section: section, script: strings.Join(body, "\n") + "\n"}
		count[section]++
		b.key = file + " > " + section
		if n := count[section]; n > 1 {
			b.key += fmt.Sprintf(" #%d", n)
		}
		var m []string
		if start > 0 {
			m = markerRE.FindStringSubmatch(lines[start-1])
		}
		if m == nil {
			return nil, fmt.Errorf("%s:%d: shell block without a <!-- run ... --> or <!-- check: WHY --> line right above it", file, b.line)
		}
		if err := b.setMarker(m[1], m[2], m[3]); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, b.line, err)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// setMarker reads a marker's kind and clauses into b.
func (b *docBlock) setMarker(kind, sep, rest string) error {
	if kind == "check" {
		if sep != ":" || rest == "" {
			return errors.New("<!-- check: WHY --> must say why the block is not run")
		}
		b.why = rest
		return nil
	}
	b.run = true
	for i, clause := range strings.Split(rest, ";") {
		clause = strings.TrimSpace(clause)
		switch {
		case clause == "" && i == 0:
		case clause == "until it succeeds":
			b.until = true
		case strings.HasPrefix(clause, "pending:"):
			b.pending = strings.TrimSpace(strings.TrimPrefix(clause, "pending:"))
			if b.pending == "" {
				return errors.New("pending: must say what is being fixed")
			}
		case i == 0 && sep == ":":
			for _, n := range strings.Split(clause, ",") {
				n = strings.TrimSpace(n)
				if docNeeds[n] == nil {
					return fmt.Errorf("unknown need %q (known: root, loopback, tshark, qemu)", n)
				}
				b.needs = append(b.needs, n)
			}
		default:
			return fmt.Errorf("unknown marker clause %q", clause)
		}
	}
	return nil
}

func TestParseDocBlocks(t *testing.T) {
	t.Parallel()
	md := "# A\n<!-- run -->\n```sh\necho a\n```\n<!-- run: root, tshark; until it succeeds -->\n```sh\necho b\n```\n" +
		"## B\n```\nnot shell\n```\n<!-- check: needs a NIC -->\n```bash\necho c\n```\n<!-- run; pending: bug 7 -->\n```sh\necho d\n```\n"
	got, err := parseDocBlocks("x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].key != "x.md > A" || got[1].key != "x.md > A #2" || !got[1].until ||
		!slices.Equal(got[1].needs, []string{"root", "tshark"}) || got[2].run || got[2].why != "needs a NIC" ||
		got[3].pending != "bug 7" || !got[3].run || got[0].script != "echo a\n" {
		t.Fatalf("%+v", got)
	}
	for _, bad := range []string{
		"```sh\necho hi\n```\n",
		"<!-- run -->\n\n```sh\necho hi\n```\n",
		"<!-- run: mainframe -->\n```sh\necho hi\n```\n",
		"<!-- check -->\n```sh\necho hi\n```\n",
		"<!-- run; pending: -->\n```sh\necho hi\n```\n",
		"<!-- run; sometimes -->\n```sh\necho hi\n```\n",
		"<!-- run -->\n```sh\necho hi\n",
	} {
		if _, err := parseDocBlocks("x.md", bad); err == nil {
			t.Errorf("parseDocBlocks(%q) accepted it", bad)
		}
	}
}

// shellCommands splits a script into simple commands, each as its words:
// it knows quotes, backslash continuations, comments, the operators
// ; & && | || ( ) and redirections (dropped with their targets), and keeps
// $(...) inside its word. Enough for documentation, not a shell.
func shellCommands(script string) [][]string {
	var cmds [][]string
	var cur []string
	var word strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			cur = append(cur, word.String())
		}
		word.Reset()
		inWord = false
	}
	endCmd := func() {
		endWord()
		if len(cur) > 0 {
			cmds = append(cmds, cur)
		}
		cur = nil
	}
	s := script
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && s[i+1] == '\n':
			i++
		case c == '\\' && i+1 < len(s):
			word.WriteByte(s[i+1])
			inWord = true
			i++
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				j = len(s) - i - 1
			}
			word.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			depth := 0
			j := i + 1
			for ; j < len(s); j++ {
				if s[j] == '(' {
					depth++
				} else if s[j] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			word.WriteString(s[i:min(j+1, len(s))])
			inWord = true
			i = j
		case c == '#' && !inWord:
			for i < len(s) && s[i] != '\n' {
				i++
			}
			endCmd()
		case c == '>' || c == '<':
			// An fd number glued to the operator is part of it.
			if inWord && strings.Trim(word.String(), "0123456789") == "" {
				word.Reset()
				inWord = false
			}
			endWord()
			for i+1 < len(s) && (s[i+1] == '>' || s[i+1] == '&') {
				i++
			}
			// Drop the target: the next word.
			for i+1 < len(s) && (s[i+1] == ' ' || s[i+1] == '\t') {
				i++
			}
			for i+1 < len(s) && strings.IndexByte(" \t\n;&|()", s[i+1]) < 0 {
				i++
			}
		case c == ' ' || c == '\t':
			endWord()
		case c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')':
			endCmd()
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

func TestShellCommands(t *testing.T) {
	t.Parallel()
	got := shellCommands("echo 00 | dxpu tlp decode   # JSON\nexport T=$(cat tok)    # or --token-file\n" +
		"dxpu a --x 'b c' > out 2>&1 &\nmkdir -p d && cp x d/\ndxpu b \\\n  --y 1 <in; dxpu c -Y 'k == \"v\"'\n")
	want := [][]string{{"echo", "00"}, {"dxpu", "tlp", "decode"}, {"export", "T=$(cat tok)"},
		{"dxpu", "a", "--x", "b c"}, {"mkdir", "-p", "d"}, {"cp", "x", "d/"}, {"dxpu", "b", "--y", "1"}, {"dxpu", "c", "-Y", `k == "v"`}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// dxpuArgs returns the arguments of words when they run dxpu (dxpu,
// bin/dxpu, after sudo or VAR=value), or false.
func dxpuArgs(words []string) ([]string, bool) {
	for len(words) > 0 && (words[0] == "sudo" || strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-")) {
		words = words[1:]
	}
	if len(words) == 0 || (words[0] != "dxpu" && !strings.HasSuffix(words[0], "/dxpu")) {
		return nil, false
	}
	return words[1:], true
}

// checkDxpuArgs reports whether args name a runnable dxpu command with
// flags it parses and arguments it accepts.
func checkDxpuArgs(args []string) error {
	root := newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv))
	root.InitDefaultCompletionCmd() // added when it executes, as the binary does
	cmd, rest, err := root.Find(args)
	if err == nil && cmd == root && len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		// dxpu --version, dxpu --help: flags cobra adds when it executes.
		root.InitDefaultHelpFlag()
		root.InitDefaultVersionFlag()
		return root.ParseFlags(rest)
	}
	if err != nil || cmd == root {
		return fmt.Errorf("no such command (%v)", err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return err
	}
	if !cmd.Runnable() {
		return fmt.Errorf("%s runs nothing", cmd.CommandPath())
	}
	return nil
}

// checkScript runs bash -n over script and checks its dxpu commands
// against the command tree; it returns how many dxpu commands it saw.
func checkScript(t *testing.T, where, script string) int {
	t.Helper()
	cmd := exec.Command("bash", "-n")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: bash -n: %v\n%s", where, err, out)
	}
	n := 0
	for _, words := range shellCommands(script) {
		args, ok := dxpuArgs(words)
		if !ok {
			continue
		}
		n++
		if err := checkDxpuArgs(args); err != nil {
			t.Errorf("%s: %q: %v", where, strings.Join(words, " "), err)
		}
	}
	return n
}

// TestDocsBlocks: every shell block of README.md and docs/*.md has a
// marker, passes bash -n and names only dxpu commands and flags that
// exist; every output check below belongs to a block that runs.
func TestDocsBlocks(t *testing.T) {
	t.Parallel()
	keys := map[string]bool{}
	n, runs := 0, 0
	for _, f := range docFiles(t) {
		md, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseDocBlocks(f, string(md))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			n += checkScript(t, b.String(), b.script)
			keys[b.key] = b.run
			if b.run {
				runs++
				if docChecks[b.key] == nil {
					t.Errorf("%s (%s) runs, but docChecks has nothing to check its output against", b, b.key)
				}
			}
		}
	}
	for k := range docChecks {
		if !keys[k] {
			t.Errorf("docChecks[%q]: no such block, or it does not run", k)
		}
	}
	if n < 30 || runs < 5 {
		t.Errorf("only %d dxpu commands and %d blocks that run found", n, runs)
	}
}

// builtBinDir is dxpuBin's directory once it was made, for TestMain to
// remove (nil: no test needed a binary).
var builtBinDir atomic.Pointer[string]

// dxpuBin is a dxpu built once per test binary by go build, for the
// blocks and examples that run it.
var dxpuBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "dxpu-docs-bin-")
	if err != nil {
		return "", err
	}
	builtBinDir.Store(&dir)
	// dxpu-guest beside dxpu, as make build puts it: dxpu vm needs it.
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/dxpu/dxpu/cmd/dxpu", "github.com/dxpu/dxpu/cmd/dxpu-guest")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return dir, nil
})

// shellRig is where blocks run: a temporary directory that links every
// top-level entry of the repository (testdata, examples, contrib ...), so
// relative paths resolve as in a checkout while what the blocks write
// stays there; HOME is inside it and the fresh dxpu first on PATH.
type shellRig struct {
	t      *testing.T
	dir    string
	env    []string
	groups []int // process groups still holding background daemons
	logs   []string
	// guard kills the groups if this test binary dies (a signal, its
	// -timeout) before stopDaemons: their daemons would hold ports, a
	// QEMU guest and addresses for the next run.
	guard *waitfor.GroupGuard
}

func newShellRig(t *testing.T) *shellRig {
	t.Helper()
	bin, err := dxpuBin()
	if err != nil {
		t.Fatal(err)
	}
	r := &shellRig{t: t, dir: t.TempDir()}
	if r.guard, err = waitfor.NewGroupGuard(); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" || e.Name() == "bin" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(r.dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(r.dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "HOME" && k != "PATH" && !strings.HasPrefix(k, "DXPU_TOKEN") {
			r.env = append(r.env, kv)
		}
	}
	r.env = append(r.env, "HOME="+home, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	// Go's caches stay where they are (by default under the real HOME):
	// make build in a block reuses them.
	out, err := exec.Command("go", "env", "GOPATH", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	for i, v := range strings.Fields(string(out)) {
		r.env = append(r.env, []string{"GOPATH=", "GOMODCACHE=", "GOCACHE="}[i]+v)
	}
	t.Cleanup(func() {
		r.stopDaemons()
		r.guard.Close()
	})
	return r
}

// A script is killed when it stands still: no new output and no CPU used
// by its process group for scriptStall (a slow build under load keeps
// going). A block that waits on daemons is re-run every retryEvery until
// it succeeds, while the daemons move (their logs grow or they use CPU);
// it fails once they and it have stood still for scriptStall.
const (
	scriptStall = waitfor.CommandStall
	retryEvery  = 200 * time.Millisecond
)

// run runs script once with bash -e -o pipefail in its own process group
// and returns its output (stdout and stderr) and exit error. Daemons it
// leaves in the background keep running until stopDaemons.
func (r *shellRig) run(name, script string) (string, error) {
	log := filepath.Join(r.dir, fmt.Sprintf("%02d-%s.log", len(r.logs), regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(name, "-")))
	r.logs = append(r.logs, log)
	f, err := os.Create(log)
	if err != nil {
		return "", err
	}
	defer f.Close()
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	// A file, not a pipe: background daemons would hold a pipe open.
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = r.dir, r.env, f, f
	err = waitfor.CommandGuarded(cmd, scriptStall, r.guard)
	if cmd.Process != nil {
		r.groups = append(r.groups, cmd.Process.Pid)
	}
	out, rerr := os.ReadFile(log)
	return string(out), errors.Join(err, rerr)
}

// stopLast kills the process group of the latest script (the daemons a
// failed block left running) and waits until none of it runs, so that a
// run again finds their addresses free.
func (r *shellRig) stopLast(t *testing.T) {
	g := r.groups[len(r.groups)-1]
	r.groups = r.groups[:len(r.groups)-1]
	r.guard.Kill(g)
	waitfor.Until(t, "the failed block's daemons gone", func() bool { return !waitfor.GroupAlive(g) })
}

// lastKitRun is a block's output from the end of the kit's previous
// report on: its latest kit run and the daemons' logs beside it.
func lastKitRun(out string) string {
	if ms := summaryLine.FindAllStringIndex(out, -1); len(ms) > 1 {
		return out[ms[len(ms)-2][1]:]
	}
	return out
}

// daemonNotRunning reports whether a block's latest kit run failed only
// rules bounding how soon the daemon answers while the daemon logged its
// timer late.
func daemonNotRunning(out string) bool {
	last := lastKitRun(out) // the kit's report and the daemons' logs together
	return daemonStarved(last, last)
}

// stopDaemons kills what the scripts left running (each script's process
// group).
func (r *shellRig) stopDaemons() {
	for _, g := range r.groups {
		r.guard.Kill(g)
	}
	r.groups = nil
}

// runUntil runs script until it succeeds, failing when neither the
// daemons started before it (their process groups' CPU, their logs) nor
// its attempts' output moved for scriptStall.
func (r *shellRig) runUntil(name, script string) (string, error) {
	groups, logs := slices.Clone(r.groups), slices.Clone(r.logs)
	w := waitfor.NewStall(scriptStall)
	start := time.Now()
	for attempt := 1; ; attempt++ {
		out, err := r.run(name, script)
		if err == nil {
			return out, nil
		}
		p := waitfor.GroupCPU(groups...)
		for _, l := range logs {
			if st, serr := os.Stat(l); serr == nil {
				p += uint64(st.Size())
			}
		}
		if w.Stalled(p) {
			return out, fmt.Errorf("still failing after %v (%d attempts), the daemons it waits on idle and silent for %v: %w",
				time.Since(start).Round(time.Second), attempt, scriptStall, err)
		}
		time.Sleep(retryEvery)
	}
}

// TestDocsRun runs the shell blocks of README.md and docs/*.md that are
// marked to run, in order, as written, in one rig per file, against a
// dxpu built from this checkout, and checks their output against what the
// text around them claims (docChecks). Daemons a block starts in the
// background live until the next heading.
func TestDocsRun(t *testing.T) {
	for _, f := range docFiles(t) {
		md, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseDocBlocks(f, string(md))
		if err != nil {
			t.Fatal(err)
		}
		var r *shellRig
		section := ""
		for _, b := range blocks {
			if !b.run {
				continue
			}
			if r == nil {
				r = newShellRig(t)
			}
			if b.section != section {
				r.stopDaemons()
				section = b.section
			}
			t.Run(b.key, func(t *testing.T) {
				if b.pending != "" {
					privtest.OptIn(t, pendingEnv, "the block waits for a fix: "+b.pending)
				}
				for _, n := range b.needs {
					docNeeds[n](t)
				}
				runAt := r.run
				if b.until {
					runAt = r.runUntil
				}
				out, err := runAt(b.key, b.script)
				// A kit run that failed only rules bounding how soon the
				// daemon answers, while that daemon logged its timer late
				// (the machine did not run it), judged the machine: the
				// block runs again, twice at most (TestConformDaemon does
				// the same). Without the daemon's word it fails at once.
				for try := 1; err != nil && try < 3 && daemonNotRunning(out); try++ {
					t.Logf("%s: run %d: the daemon was not running:\n%s", b, try, lastKitRun(out))
					r.stopLast(t)
					out, err = runAt(b.key, b.script)
				}
				if err != nil {
					t.Fatalf("%s: %v\n--- script:\n%s--- output:\n%s", b, err, b.script, out)
				}
				check, ok := docChecks[b.key]
				if !ok {
					t.Fatalf("%s: no check in docChecks for this block", b)
				}
				for _, e := range check(docRun{out: out, dir: r.dir, md: string(md)}) {
					t.Errorf("%s: %s\n--- output:\n%s", b, e, out)
				}
			})
		}
	}
}

// docRun is what a block left: its output, the rig's directory, and the
// markdown around it (for tables its output must match).
type docRun struct {
	out, dir, md string
}

// contains returns a complaint for each of wants missing from the output.
func (d docRun) contains(wants ...string) []string {
	var errs []string
	for _, w := range wants {
		if !strings.Contains(d.out, w) {
			errs = append(errs, fmt.Sprintf("output lacks %q", w))
		}
	}
	return errs
}

// files returns a complaint for each of names not written in the rig.
func (d docRun) files(names ...string) []string {
	var errs []string
	for _, n := range names {
		if st, err := os.Stat(filepath.Join(d.dir, n)); err != nil || st.Size() == 0 {
			errs = append(errs, fmt.Sprintf("%s not written (%v)", n, err))
		}
	}
	return errs
}

// json returns a complaint unless the output holds "key": value, in
// compact or indented JSON (value a regular expression).
func (d docRun) json(key, value string) []string {
	if !regexp.MustCompile(`"` + regexp.QuoteMeta(key) + `":\s*` + value).MatchString(d.out) {
		return []string{fmt.Sprintf("output lacks %q: %s", key, value)}
	}
	return nil
}

// mdTable returns the lines of the markdown table whose header starts
// with header.
func (d docRun) mdTable(header string) []string {
	lines := strings.Split(d.md, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, header) {
			j := i
			for j < len(lines) && strings.HasPrefix(lines[j], "|") {
				j++
			}
			return lines[i:j]
		}
	}
	return nil
}

// docChecks are the output claims of every block that runs, by block key.
var docChecks = map[string]func(d docRun) []string{
	"README.md > The demo": func(d docRun) []string {
		// Every row of the table the README shows, exactly: virtual time.
		lines := strings.Split(d.md, "\n")
		var errs []string
		n := 0
		for i, l := range lines {
			if !strings.Contains(l, "workload    host  GPUs  added RTT") {
				continue
			}
			for _, row := range lines[i:] {
				if strings.HasPrefix(row, "```") {
					break
				}
				n++
				if !strings.Contains(d.out, row+"\n") {
					errs = append(errs, fmt.Sprintf("the demo did not print the README's row %q", row))
				}
			}
		}
		if n < 10 {
			errs = append(errs, "no demo table in the README")
		}
		return append(errs, d.contains("note: traces: 5 from "+filepath.Join(d.dir, "testdata", "traces"))...)
	},
	"README.md > TLPs and captures": func(d docRun) []string {
		errs := d.contains(
			// decode: the fields the comment lists, and the MRd it is.
			`"kind":"MRd","fmt":0,"type":0,"tc":0,"attr":0`, `"address":"0xfedc0010"`,
			`"encap":"nettlp","truncated":false`,
			"\n000000010100050ffedc0010\n", // encode(decode(x)) == x
			"b.pcap: 200 frames read, 200 written",
			"testdata/pcap/mix.pcap\n  frames           96 (24 VLAN-tagged, 0 sealed, 0 did not parse)\n  encapsulations   dxpu-eth 48, dxpu-udp 24, nettlp 24\n")
		return append(errs, d.files("mix.pcap", "b.pcap")...)
	},
	"README.md > Wireshark": tsharkCplD,
	"README.md > Wireshark #2": func(d docRun) []string {
		return append(d.files("home/.local/lib/wireshark/plugins/dxpu.lua"), tsharkCplD(d)...)
	},
	"README.md > Bridges": func(d docRun) []string {
		return d.contains(`"invariants_hold": true`, `"goodput_ratio"`, `"keyed_ratio"`, `"delivered"`, `"duplicated": 0`,
			"lost 0 (reported 0, link downs 0) duplicated 0 misordered 0 unanswered 0")
	},
	"README.md > Bridges #2": func(d docRun) []string {
		// BOOT_0 of the emulated H100, read through both bridges.
		return d.contains("read 4 of 4 bytes at 0x90000000", "00000000  a1 00 00 18")
	},
	"README.md > Switch #2": func(d docRun) []string {
		return append(d.contains("output matches testdata/switch/expected/mix.pcap.out.pcap (54 frames)"),
			d.json("go_allocs_per_frame", "0,")...)
	},
	"README.md > Emulator and microbenchmarks": func(d docRun) []string {
		var errs []string
		for _, kv := range [][2]string{
			{"clock", `"virtual"`}, {"native_gbps", "[0-9]"}, {"fabric_gbps", "[0-9]"}, // bench fabric
			{"mode", `"loopback"`}, {"mmio_read_p50_us", "[0-9]"}, {"echo_p50_us", "[0-9]"}, {"launch_sync_us", "[0-9]"}, // bench e2e
		} {
			errs = append(errs, d.json(kv[0], kv[1])...)
		}
		return errs
	},
	"README.md > Emulator and microbenchmarks #2": func(d docRun) []string {
		return append(d.json("mode", `"netns"`), d.json("mmio_read_p50_us", "[0-9]")...)
	},
	// A daemon: the read below checks it.
	"README.md > Emulator and microbenchmarks #3": func(docRun) []string { return nil },
	"README.md > Emulator and microbenchmarks #4": func(d docRun) []string {
		return d.contains("read 16 of 16 bytes at 0x1000", "00000000  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00")
	},
	// Its own block: the guest below needs bin/dxpu without root too.
	"README.md > A real host: a QEMU guest borrows a remote GPU #2": func(d docRun) []string {
		return d.files("bin/dxpu", "bin/dxpu-guest")
	},
	"README.md > A real host: a QEMU guest borrows a remote GPU #3": func(d docRun) []string {
		var errs []string
		for _, kv := range [][2]string{{"path", `"netns-xdp"`}, {"path", `"loopback"`}, {"h2d_ok", "true"}, {"d2h_ok", "true"}, {"launch_sync_ok", "true"}} {
			errs = append(errs, d.json(kv[0], kv[1])...)
		}
		return errs
	},
	"README.md > A real host: a QEMU guest borrows a remote GPU #4": func(d docRun) []string {
		return d.contains("10de") // the guest lists the NVIDIA function
	},
	// The kit against `dxpu bridge` of each role, as processes: no rule
	// failed and most judged (the script runs under bash -e, so a failing
	// kit fails it before this check).
	"README.md > Protocol spec, conformance kit and C library #2": func(d docRun) []string {
		var errs []string
		sides := map[string]bool{}
		for _, m := range summaryLine.FindAllStringSubmatch(d.out, -1) {
			sides[m[4]] = true
			if pass, _ := strconv.Atoi(m[1]); m[2] != "0" || pass < 40 {
				errs = append(errs, fmt.Sprintf("%s side: %q, want no rule failed and at least 40 passed", m[4], m[0]))
			}
		}
		if !sides["gpu"] || !sides["host"] {
			errs = append(errs, fmt.Sprintf("a kit report per role wanted, got %v", sides))
		}
		return errs
	},
	// The kit over raw Ethernet (a veth pair), keyed, against the GPU side.
	"README.md > Protocol spec, conformance kit and C library #3": func(d docRun) []string {
		m := summaryLine.FindStringSubmatch(d.out)
		if m == nil {
			return []string{"no kit report"}
		}
		if pass, _ := strconv.Atoi(m[1]); m[2] != "0" || pass < 40 || m[4] != "gpu" || !strings.Contains(m[0], "eth:dxkit1:") {
			return []string{fmt.Sprintf("%q, want the GPU side over eth:dxkit1 with no rule failed and at least 40 passed", m[0])}
		}
		return d.contains("KEY-2   pass")
	},
	"README.md > Performance model": func(d docRun) []string {
		errs := append(d.files("overhead.svg", "fabric.json"),
			d.contains("trace recsys-adagrad-a100: 109123 events", "budget ")...)
		// --markdown prints the first table exactly.
		for _, row := range d.mdTable("| trace | measured span |") {
			if !strings.Contains(d.out, row+"\n") {
				errs = append(errs, fmt.Sprintf("--markdown did not print the README's row %q", row))
			}
		}
		// --validate prints, per trace, predicted and measured per RTT:
		// the second table, "predicted / measured".
		rows := map[string][]string{}
		trace := ""
		traceRE := regexp.MustCompile(`^trace (\S+):`)
		rowRE := regexp.MustCompile(`^\s+(?:2|5|10|20)\s+(-?[0-9.]+) %\s+(-?[0-9.]+) %\s+[-+][0-9.]+ pp$`)
		for _, l := range strings.Split(d.out, "\n") {
			if m := traceRE.FindStringSubmatch(l); m != nil {
				trace = m[1]
				rows[trace] = nil
			} else if m := rowRE.FindStringSubmatch(l); m != nil {
				rows[trace] = append(rows[trace], m[1]+" / "+m[2])
			}
		}
		want := d.mdTable("| trace | +2 us |")
		if len(want) < 7 {
			return append(errs, "no predicted / measured table in the README")
		}
		for _, row := range want[2:] {
			cells := strings.Split(strings.Trim(row, "| "), " | ")
			if got := rows[cells[0]]; !slices.Equal(got, cells[1:]) {
				errs = append(errs, fmt.Sprintf("--validate for %s: %q, the README says %q", cells[0], got, cells[1:]))
			}
		}
		return errs
	},
}

// exampleMarkers are the markers of the commands whose Example cannot
// simply run (a README marker's syntax); every other Example runs.
var exampleMarkers = map[string]string{
	"dxpu bench e2e":     "<!-- run: root -->",
	"dxpu conform":       "<!-- check: needs an implementation under test at 192.0.2.7 or on eth1 -->",
	"dxpu vm demo":       "<!-- run: qemu -->",
	"dxpu chaos":         "<!-- check: campaigns of six daemons for 30 s and more; TestChaosCampaign runs one -->",
	"dxpu bench manager": "<!-- check: 10 s benchmarks of 10,000 GPUs each, and an etcd cluster of the user's; its package's tests run it small -->",
	"dxpu vm run":        "<!-- run: qemu, loopback -->",
	"dxpu bench scale":   "<!-- check: dozens of bridge processes for minutes, or root; TestBenchScaleProcess runs it small -->",
}

// commandExamples returns every command of the tree with an Example, by
// command path, each as a docBlock under its marker.
func commandExamples(t *testing.T) []docBlock {
	t.Helper()
	var blocks []docBlock
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example != "" {
			b := docBlock{file: "Example of", key: c.CommandPath(), section: c.CommandPath()}
			for _, l := range strings.Split(c.Example, "\n") {
				b.script += strings.TrimSpace(l) + "\n"
			}
			if m, ok := exampleMarkers[b.key]; ok {
				mm := markerRE.FindStringSubmatch(m)
				if mm == nil {
					t.Fatalf("exampleMarkers[%q] = %q: not a marker", b.key, m)
				}
				if err := b.setMarker(mm[1], mm[2], mm[3]); err != nil {
					t.Fatalf("exampleMarkers[%q]: %v", b.key, err)
				}
			} else {
				b.run = true
			}
			blocks = append(blocks, b)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv)))
	seen := map[string]bool{}
	for _, b := range blocks {
		seen[b.key] = true
	}
	for k := range exampleMarkers {
		if !seen[k] {
			t.Errorf("exampleMarkers[%q]: no such command with an Example", k)
		}
	}
	if len(blocks) < 5 {
		t.Fatalf("only %d commands with an Example", len(blocks))
	}
	return blocks
}

// TestCommandExamples walks the command tree: every command's Example
// passes bash -n with dxpu lines the tree accepts, and runs as written
// (in a rig like the README's, under its marker in exampleMarkers): it
// exits 0, and an example with --json prints JSON.
func TestCommandExamples(t *testing.T) {
	blocks := commandExamples(t)
	for _, b := range blocks {
		if checkScript(t, "Example of "+b.key, b.script) == 0 {
			t.Errorf("Example of %s runs no dxpu command:\n%s", b.key, b.script)
		}
	}
	r := newShellRig(t)
	for _, b := range blocks {
		if !b.run {
			continue
		}
		t.Run(b.key, func(t *testing.T) {
			defer r.stopDaemons()
			if b.pending != "" {
				privtest.OptIn(t, pendingEnv, "the example waits for a fix: "+b.pending)
			}
			for _, n := range b.needs {
				docNeeds[n](t)
			}
			out, err := r.run(b.key, b.script)
			if err != nil {
				t.Fatalf("Example of %s: %v\n--- script:\n%s--- output:\n%s", b.key, err, b.script, out)
			}
			if strings.Contains(b.script, "--json") && !regexp.MustCompile(`(?m)^\{"`).MatchString(out) &&
				!regexp.MustCompile(`(?m)^\{\n  "`).MatchString(out) {
				t.Errorf("Example of %s: --json printed no JSON object:\n%s", b.key, out)
			}
		})
	}
}

// tsharkCplD checks tshark's summary lines under -Y 'dxpu.tlp.kind ==
// "CplD"': the dissector loaded, and every frame it kept holds a CplD.
func tsharkCplD(d docRun) []string {
	var errs []string
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(d.out), "\n") {
		if strings.HasPrefix(l, "Running as user") { // tshark's warning to root
			continue
		}
		n++
		if !strings.Contains(l, "CplD") {
			errs = append(errs, fmt.Sprintf("line without a CplD: %q", l))
		}
	}
	if n < 10 {
		errs = append(errs, fmt.Sprintf("%d frames with a CplD, want the mix capture's dozens", n))
	}
	return errs
}
