package main

import (
	"context"
	"strings"
	"testing"
)

// TestErrorIsOneLine: a file name or operand holding a newline, a carriage
// return, a terminal escape or a byte that is not UTF-8 still gets an
// error of one line, which shows the name escaped.
func TestErrorIsOneLine(t *testing.T) {
	t.Parallel()
	bad := "/nonexistent/a\nb\r\x1b[2J\xe9\u2028.pcap"
	shown := `/nonexistent/a\nb\r\x1b[2J\xe9\u2028.pcap`
	for _, args := range [][]string{
		{"pcap", "info", bad},
		{"tlp", "decode", "--pcap", bad},
		{"model", "--trace", bad},
		{"pcap", "unseal", "--key-log", bad, "a.pcap", "b.pcap"},
	} {
		var out, errb strings.Builder
		code := run(context.Background(), newEnv(strings.NewReader(""), &out, &errb, args, noEnv))
		msg := errb.String()
		if code == 0 || out.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") ||
			strings.ContainsAny(msg, "\r\x1b\u2028") || !strings.Contains(msg, shown) || !strings.HasPrefix(msg, "dxpu: ") {
			t.Errorf("dxpu %q: exit %d, stdout %q, stderr %q: want one line naming %s", args, code, out.String(), msg, shown)
		}
	}
}
