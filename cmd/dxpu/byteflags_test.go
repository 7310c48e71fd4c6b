package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// byteish says a flag looks like a count of bytes: its name ends in size
// or bytes, it is a frame or payload limit, or its usage speaks of bytes.
var byteish = regexp.MustCompile(`(^|-)(size|bytes|mtu|mps|mrrs|max-payload|snaplen|rcb)$`)

// notByteCounts are flags whose usage mentions bytes but that count
// none: a key's form, a seed's effect, a fill pattern.
var notByteCounts = map[string]bool{"key-file": true, "next-key-file": true, "seed": true, "fill": true}

// bytesLater are string flags read as byte counts (bytesize) when the
// command runs, because they hold lists or more than a count.
var bytesLater = map[string]bool{"mem-size": true, "sizes": true, "rcvbuf": true, "base": true, "mem-base": true}

// notYet are byte-count flags of commands being reworked elsewhere; each
// is to become a bytesVar there.
var notYet = map[string]bool{"dxpu pcap capture --snaplen": true}

// TestByteFlagsTakeSuffixes walks the command tree: every flag that counts
// bytes takes 4K as 4096 (the K, M, G suffixes `dxpu help units` promises;
// `bench link --read-size 4K` was strconv's error), and a count it cannot
// read is refused with exit status 2 in one line naming the flag and what
// a count looks like.
func TestByteFlagsTakeSuffixes(t *testing.T) {
	t.Parallel()
	root := newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv))
	checked := map[string]bool{}
	for _, c := range allCommands(root) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			name := c.CommandPath() + " --" + f.Name
			if notByteCounts[f.Name] || !byteish.MatchString(f.Name) && !strings.Contains(f.Usage, "bytes") {
				return
			}
			switch {
			case notYet[name]:
				return
			case f.Value.Type() == "string" && bytesLater[f.Name]:
				return
			case f.Value.Type() != "bytes":
				t.Errorf("%s is a %s flag: want a byte count (bytesVar) that takes 4K", name, f.Value.Type())
				return
			}
			checked[name] = true
			if err := f.Value.Set("4K"); err != nil || f.Value.String() != "4K" {
				t.Errorf("%s 4K: %q, %v; want 4K, 4096 bytes", name, f.Value.String(), err)
			}
			if err := f.Value.Set("4096"); err != nil || f.Value.String() != "4K" {
				t.Errorf("%s 4096: %q, %v; want 4K", name, f.Value.String(), err)
			}
			args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "dxpu")), "--"+f.Name, "4Q")
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a command that took the value would run: let it find its context done
			var out, errb strings.Builder
			code := run(ctx, newEnv(strings.NewReader(""), &out, &errb, args, noEnv))
			stderr := strings.TrimSpace(errb.String())
			if code != 2 || out.Len() != 0 || strings.Contains(stderr, "\n") || !strings.Contains(stderr, `"--`+f.Name+`"`) ||
				!strings.Contains(stderr, "want a byte count like 64M, 4096 or 0x1000") || strings.Contains(stderr, "strconv") {
				t.Errorf("dxpu %s: exit %d, stderr %q; want 2 and one line naming --%s and what a byte count looks like", strings.Join(args, " "), code, stderr, f.Name)
			}
		})
	}
	for _, want := range []string{"dxpu bench link --read-size", "dxpu bench link --write-size", "dxpu nettlp read --size", "dxpu vm demo --bytes",
		"dxpu bridge --mtu", "dxpu pcap generate --ether-mtu", "dxpu pcap convert --mtu"} {
		if !checked[want] {
			t.Errorf("%s was not checked", want)
		}
	}
	for name := range notYet {
		if checked[name] {
			t.Errorf("%s takes byte counts now: drop it from notYet", name)
		}
	}
}
