package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shellBlocks returns the lines of the ```sh blocks of a markdown file,
// with backslash continuations joined.
func shellBlocks(md string) []string {
	var out []string
	in := false
	cont := ""
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		}
		if !in {
			continue
		}
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cont += l + " "
			continue
		}
		out = append(out, cont+line)
		cont = ""
	}
	return out
}

// TestWalkthroughCommands: every dxpu command in examples/README.md names
// a command that exists and flags it accepts with values it parses, and
// every example file it names exists. (examples/walkthrough_test.go runs
// the walk-through across machines in network namespaces.)
func TestWalkthroughCommands(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile(filepath.Join(examplesDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range shellBlocks(string(md)) {
		// The dxpu command ends where the shell pipes or redirects it.
		line, _, _ = strings.Cut(line, " | ")
		line, _, _ = strings.Cut(line, " > ")
		words := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), "&"))
		if len(words) == 0 || words[0] != "dxpu" {
			continue
		}
		n++
		root := newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv))
		cmd, rest, err := root.Find(words[1:])
		if err != nil || cmd == root {
			t.Errorf("%q: no such command (%v)", line, err)
			continue
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("%q: %v", line, err)
			continue
		}
		if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
			t.Errorf("%q: %v", line, err)
		}
		if !cmd.Runnable() {
			t.Errorf("%q: %s runs nothing", line, cmd.CommandPath())
		}
		for _, w := range words {
			if strings.HasPrefix(w, "examples/") {
				if _, err := os.Stat(filepath.Join("../..", w)); err != nil {
					t.Errorf("%q names a missing file: %v", line, err)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d dxpu commands found in the walk-through", n)
	}
}
