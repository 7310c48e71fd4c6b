package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// writeFlags are the flags of dxpu commands that name a file to write (or
// a secret to keep beside them, as --token-file).
var writeFlags = []string{"--out", "--plot", "--store", "--token-file", "--agent-credential-out", "--history", "--key-log"}

var (
	quoted   = regexp.MustCompile(`'[^']*'|"[^"]*"`)
	comment  = regexp.MustCompile(`(^|[ \t])#.*`)
	redirect = regexp.MustCompile(`(?:^|[^0-9&<>])(?:[0-9]?>>?|&>>?)[ \t]*([^ \t\n;&|()<>]+)`)
)

// writtenFiles returns the relative paths script writes: the targets of
// its redirections, the values of writeFlags, and pcap unseal's OUT.
func writtenFiles(script string) []string {
	var out []string
	plain := comment.ReplaceAllString(quoted.ReplaceAllString(script, "Q"), "$1")
	for _, m := range redirect.FindAllStringSubmatch(plain, -1) {
		out = append(out, m[1])
	}
	for _, words := range shellCommands(script) {
		for i, w := range words {
			for _, f := range writeFlags {
				if w == f && i+1 < len(words) {
					out = append(out, words[i+1])
				} else if v, ok := strings.CutPrefix(w, f+"="); ok {
					out = append(out, v)
				}
			}
		}
		if args, ok := dxpuArgs(words); ok && len(args) > 3 && args[0] == "pcap" && args[1] == "unseal" {
			out = append(out, args[len(args)-1])
		}
	}
	return slices.DeleteFunc(out, func(p string) bool {
		return p == "" || strings.ContainsAny(p[:1], "/~$-&") || strings.Contains(p, "$(")
	})
}

func TestWrittenFiles(t *testing.T) {
	t.Parallel()
	got := writtenFiles("echo x > a.hex   # 'not > b'\ndxpu bench fabric --json >fabric.json 2>&1\necho 'q > c' >> d.log\n" +
		"dxpu manager --store pool.db --token-file=tok\ndxpu pcap unseal --key-log k.log in.pcap out.pcap\necho > /dev/null\n" +
		"dxpu model --plot \"o.svg\" x.json\nhead -c 32 /dev/urandom > ~/p.key\n")
	want := []string{"a.hex", "fabric.json", "d.log", "pool.db", "tok", "k.log", "out.pcap", "o.svg"}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// TestDocsWritesIgnored: every file the shell blocks of README.md and
// docs/*.md write in the directory they run in, the repository root, is
// one git ignores. Run from a clone, they left keys, tokens and
// credentials untracked there, and a build after them stamped its
// version "+dirty" (vcs.modified) with no source changed.
func TestDocsWritesIgnored(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	n := 0
	for _, f := range docFiles(t) {
		md, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseDocBlocks(f, string(md))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			for _, p := range writtenFiles(b.script) {
				n++
				// --no-index: the rules alone, whatever is tracked.
				err := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", p).Run()
				var ee *exec.ExitError
				switch {
				case errors.As(err, &ee) && ee.ExitCode() == 1:
					t.Errorf("%s writes %s, which .gitignore does not ignore: add it there", b, p)
				case err != nil:
					t.Fatalf("git check-ignore %s: %v", p, err)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d files written by the docs' blocks found", n)
	}
}
