package manager

import "testing"

// headerEnd finds the blank line that ends a request header in one read
// or split across reads (lastBytes carries the end of the last one).
func TestHeaderEnd(t *testing.T) {
	for _, c := range []struct {
		reads []string
		want  bool
	}{
		{[]string{"GET / HTTP/1.1\r\nHost: m\r\n\r\n"}, true},
		{[]string{"GET / HTTP/1.1\r\nHost: m\r\n"}, false},
		{[]string{"GET / HTTP/1.1\r\nHost: m\r", "\n\r\n"}, true},
		{[]string{"GET / HTTP/1.1\r\nHost: m\r\n", "\r", "\n"}, true},
		{[]string{"GET / HTTP/1.1\nHost: m\n", "\n"}, true},
		{[]string{"GET / HTTP/1.1\r\nX-Drip: ", "a", "b", "\r\n"}, false},
	} {
		var tail [3]byte
		got := false
		for _, r := range c.reads {
			if headerEnd(tail[:], []byte(r)) {
				got = true
			}
			tail = lastBytes(tail, []byte(r))
		}
		if got != c.want {
			t.Errorf("reads %q: header end %v, want %v", c.reads, got, c.want)
		}
	}
}
