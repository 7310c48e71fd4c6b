package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FuzzQMP plays QEMU's side of the machine protocol with an arbitrary
// stream, then closes it, while a command (id "dxpu-1") waits for its
// reply. Invariants: the reader neither panics nor hangs (it takes no
// one's help with replies: it ends once the stream does); why it stopped
// is one non-empty line; the command ends, and succeeds only with a reply
// that carries its id; no more events than the stream had lines, and no
// more than the history's bounds; no more replies dropped than lines.
func FuzzQMP(f *testing.F) {
	greeting := `{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 8}, "package": ""}, "capabilities": ["oob"]}}`
	f.Add(greeting + "\n" + `{"return": {}}` + "\n" + `{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "DEVICE_DELETED", "data": {"device": "gpu0", "path": "/machine/peripheral/gpu0"}}` + "\n")
	f.Add(greeting + "\n" + `{"error": {"class": "GenericError", "desc": "Device 'gpu0' not found"}}` + "\n")
	f.Add(greeting + "\n" + `{"return": {}}` + "\n" + `{"event": "SHUTDOWN", "data": {"guest": true, "reason": "guest-shutdown"}}` + "\n" + `{"return": [1, 2]}` + "\n")
	f.Add(`{"return": {}}` + "\n" + "not json\n")
	f.Add("")
	f.Add(greeting + "\n" + `{"return": {"a": 1}, "id": "dxpu-1"}` + "\n" + `{"return": {"a": 2}, "id": "dxpu-1"}` + "\n" + `{"return": {}, "id": "dxpu-0"}` + "\n")
	f.Add(greeting + "\n" + `{"id": "dxpu-1", "error": {"class": "CommandNotFound", "desc": "The command x has not been found"}}` + "\n" + `{"return": {}, "id": 1}` + "\n" + `{"return": {}, "id": {}}` + "\n")
	f.Fuzz(func(t *testing.T, stream string) {
		sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		file := os.NewFile(uintptr(sp[0]), "qmp")
		nc, err := net.FileConn(file)
		file.Close()
		if err != nil {
			unix.Close(sp[1])
			t.Fatal(err)
		}
		q := newQMP(nc.(*net.UnixConn), nil)
		defer q.close()
		go q.read(make(chan struct{}))
		type result struct {
			ret json.RawMessage
			err error
		}
		cmd := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ret, err := q.execute(ctx, "query-status", nil, nil)
			cmd <- result{ret, err}
		}()
		go func() {
			defer unix.Close(sp[1])
			for b := []byte(stream); len(b) > 0; {
				n, err := unix.Write(sp[1], b)
				if err != nil {
					return
				}
				b = b[n:]
			}
		}()
		select {
		case <-q.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("the QMP reader did not end after QEMU closed the connection")
		}
		var r result
		select {
		case r = <-cmd:
		case <-time.After(10 * time.Second):
			t.Fatalf("the command did not end after the QMP reader did")
		}
		if r.err != nil {
			if msg := r.err.Error(); strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("command's error is not one line: %q", msg)
			}
		} else if !hasQMPReply(stream, "dxpu-1", r.ret) {
			t.Fatalf("command got %q, from no reply with its id", r.ret)
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.err == nil {
			t.Fatal("reader ended without saying why")
		}
		if msg := q.err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
			t.Fatalf("reader's error is not one line: %q", msg)
		}
		lines := strings.Count(stream, "\n") + 1
		if kept := len(q.events.kept); q.events.end() > lines || kept > maxQMPEvents || kept > 1 && q.events.bytes > maxQMPEventBytes {
			t.Fatalf("%d events seen, %d kept in %d bytes, from %d lines", q.events.end(), kept, q.events.bytes, lines)
		}
		if q.dropped > uint64(lines) {
			t.Fatalf("%d replies dropped from %d lines", q.dropped, lines)
		}
	})
}

// hasQMPReply reports whether stream holds a reply with id id returning ret.
func hasQMPReply(stream, id string, ret json.RawMessage) bool {
	for _, line := range strings.Split(stream, "\n") {
		var m struct {
			Return json.RawMessage `json:"return"`
			ID     json.RawMessage `json:"id"`
		}
		var got string
		if json.Unmarshal([]byte(line), &m) == nil && json.Unmarshal(m.ID, &got) == nil && got == id && bytes.Equal(m.Return, ret) {
			return true
		}
	}
	return false
}

// FuzzConsole follows an arbitrary guest serial console (the guest is the
// lent GPU's user: its output is not ours) and QEMU's stderr. Invariants:
// no panic; the console is marked closed at the end; every byte read is
// copied to the log; a QEMU message an error quotes (its first error line,
// or the line of a fatal KVM error) is at most maxQEMUErr bytes; no more
// events than lines.
func FuzzConsole(f *testing.F) {
	f.Add("booting\nDXPU-GUEST-UP\nDXPU-EVENT {\"event\":\"bound\",\"bdf\":\"0000:00:04.0\"}\nDXPU-RESULT-BEGIN\n{\"ok\":true,\n\"config\":\"8680\"}\nDXPU-RESULT-END\nDXPU-EXIT 0\n", "qemu-system-x86_64: warning: x\nqemu: error: KVM internal error. Suberror: 1\n")
	f.Add("DXPU-RESULT-BEGIN\r\nnot json\r\nDXPU-RESULT-END\r\nDXPU-EXIT -12\r\n", "")
	f.Add("DXPU-EVENT [1]\nDXPU-EXIT 99999999999999999999\n", strings.Repeat("e", 400)+" error\n")
	f.Fuzz(func(t *testing.T, console, stderr string) {
		c := newConsole(time.Now())
		var log bytes.Buffer
		c.follow(strings.NewReader(console), &log)
		if log.String() != console {
			t.Fatalf("log holds %d of %d bytes", log.Len(), len(console))
		}
		log.Reset()
		c.followErrors(strings.NewReader(stderr), &log)
		if log.String() != stderr {
			t.Fatalf("stderr log holds %d of %d bytes", log.Len(), len(stderr))
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.closed {
			t.Fatal("console not closed at EOF")
		}
		if len(c.qemuErr) > maxQEMUErr || len(c.fatal) > maxQEMUErr {
			t.Fatalf("QEMU message quoted in %d bytes (error %.100q), fatal message in %d (%.100q): over %d", len(c.qemuErr), c.qemuErr, len(c.fatal), c.fatal, maxQEMUErr)
		}
		if len(c.events) > strings.Count(console, "\n")+1 {
			t.Fatalf("%d events from %d lines", len(c.events), strings.Count(console, "\n")+1)
		}
	})
}

// FuzzGPUSpec reads arbitrary `dxpu vm run --gpu` values (key= naming a
// real key file, a file of the wrong size, or none). Invariants: a refusal
// is one non-empty line that names --gpu; an accepted spec has a pair ID
// of 24 bits, both addresses, a 32-byte key unless insecure, and written
// back as a spec it parses to the same.
func FuzzGPUSpec(f *testing.F) {
	for _, s := range []string{
		"pair=7,listen=127.0.0.1:0,peer=127.0.0.1:9",
		"pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,key=k",
		"pair=0x10,listen=[::1]:1,peer=127.0.0.1:2,key=k,gen=7",
		"pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,key=short",
		"pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,gen=0,key=k",
		"pair=1,,listen=127.0.0.1:1",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, insecure bool) {
		for _, kv := range strings.Split(s, ",") {
			if v, ok := strings.CutPrefix(kv, "key="); ok && (strings.Contains(v, "/") || strings.HasPrefix(v, ".")) {
				return // only the test's own files
			}
		}
		t.Chdir(t.TempDir())
		if err := os.WriteFile("k", bytes.Repeat([]byte{7}, 32), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("short", []byte("abc\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		sp, err := ParseGPUSpec(s, insecure)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "--gpu") || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("refusal %q", msg)
			}
			return
		}
		if sp.Pair == 0 || sp.Pair >= 1<<24 || !sp.Listen.IsValid() || !sp.Peer.IsValid() || insecure != (sp.Key == nil) ||
			sp.Key != nil && (len(sp.Key) != 32 || sp.KeyGeneration == 0) {
			t.Fatalf("%q accepted as %+v", s, sp)
		}
		back := "pair=" + strconv.FormatUint(uint64(sp.Pair), 10) + ",listen=" + sp.Listen.String() + ",peer=" + sp.Peer.String()
		if sp.Key != nil {
			back += ",key=k,gen=" + strconv.FormatUint(uint64(sp.KeyGeneration), 10)
		}
		sp2, err := ParseGPUSpec(back, insecure)
		if err != nil || sp2.Pair != sp.Pair || sp2.Listen != sp.Listen || sp2.Peer != sp.Peer || sp2.KeyGeneration != sp.KeyGeneration {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, sp, back, sp2, err)
		}
	})
}
