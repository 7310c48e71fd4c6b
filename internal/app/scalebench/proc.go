package scalebench

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// proc is one bridge process.
type proc struct {
	what    string // "pair 3 host side"
	gpu     bool
	metrics netip.AddrPort
	cmd     *exec.Cmd
	tail    *tailBuffer
	done    chan struct{} // closed when it exited
	err     error         // its Wait's result, once done
}

// exitError is a bridge process that stopped while the run needed it:
// the run failed (apperr.ErrFailed), its options were fine.
type exitError struct{ msg string }

func (e *exitError) Error() string        { return e.msg }
func (e *exitError) Is(target error) bool { return target == apperr.ErrFailed }

// exited returns an *exitError naming the process, the binary it ran,
// how it ended and the last line of its stderr when it has stopped.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return &exitError{fmt.Sprintf("scalebench: %s exited (%v); its stderr: %s", p.what, p.err, p.tail.lastLine())}
	default:
		return nil
	}
}

// stop ends the process: SIGTERM, then SIGKILL after 5 s.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// cpu returns the process's CPU time (user and system) from /proc.
func (p *proc) cpu() time.Duration { return procCPU(p.cmd.Process.Pid) }

// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTicks = 100

// procCPU reads /proc/PID/stat's utime and stime; 0 once the process is
// gone.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	return statCPU(string(b))
}

// statCPU is the utime plus stime of a /proc/PID/stat line (0 when it
// does not parse).
func statCPU(s string) time.Duration {
	// The command name may hold spaces and parentheses: the fields start
	// after its last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(u+st) * time.Second / clockTicks
}

// tailBuffer keeps the last bytes written to it: a process's stderr.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

const tailMax = 4096

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = append(t.b[:0], t.b[len(t.b)-tailMax:]...)
	}
	return len(p), nil
}

// lastLine is the last non-empty line written.
func (t *tailBuffer) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	if l := lines[len(lines)-1]; l != "" {
		return l
	}
	return "no output"
}

// startPair starts pair i's GPU side and host side (o.Binary, o.MTU,
// o.MPS), on CPU cpu when it is not negative; a key of 32 random bytes
// goes into dir unless o.Insecure.
func startPair(fab fabric, o *Options, dir string, i int, e endpoints, cpu int) ([]*proc, error) {
	pairID := strconv.Itoa(i + 1)
	bin, insecure := o.Binary, o.Insecure
	common := []string{"bridge", "--pair", pairID, "--keepalive", "100ms", "--dead-after", "5s", "--completion-timeout", "2s",
		"--mtu", strconv.Itoa(o.MTU), "--max-payload", strconv.Itoa(max(o.MPS, 512))}
	if cpu >= 0 {
		common = append(common, "--cpus", strconv.Itoa(cpu))
	}
	if o.Spin > 0 { // only when asked: a --bridge-binary from before it has no --spin
		common = append(common, "--spin", o.Spin.String())
	}
	if insecure {
		common = append(common, "--insecure-no-keys")
	} else {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("scalebench: pair key: %w", err)
		}
		f := filepath.Join(dir, "pair"+pairID+".key")
		if err := os.WriteFile(f, key, 0o600); err != nil {
			return nil, fmt.Errorf("scalebench: pair key: %w", err)
		}
		common = append(common, "--key-file", f)
	}
	sides := []struct {
		what string
		gpu  bool
		args []string
	}{
		{"GPU side", true, []string{"--role", "gpu", "--listen", e.gpuListen.String(), "--peer", e.gpuPeer.String(), "--metrics", e.gpuMetrics.String(),
			"--pcie", "memory", "--mem-base", fmt.Sprintf("%#x", memBase), "--mem-size", "16M", "--mps", strconv.Itoa(o.MPS)}},
		{"host side", false, []string{"--role", "host", "--listen", e.hostListen.String(), "--peer", e.hostPeer.String(), "--metrics", e.hostMetrics.String(),
			"--pcie", "nettlp:" + e.adapter.String() + ":" + e.load.String()}},
	}
	var ps []*proc
	for _, s := range sides {
		p := &proc{what: fmt.Sprintf("pair %s %s (%s bridge)", pairID, s.what, bin), gpu: s.gpu, tail: &tailBuffer{}, done: make(chan struct{})}
		p.metrics = e.hostMetrics
		if s.gpu {
			p.metrics = e.gpuMetrics
		}
		p.cmd = exec.Command(bin, append(append([]string{}, common...), s.args...)...)
		p.cmd.Stderr = p.tail
		if err := fab.start(p.cmd, s.gpu); err != nil {
			for _, q := range ps {
				q.stop()
			}
			return nil, fmt.Errorf("scalebench: starting %s: %w", p.what, err)
		}
		go func() { p.err = p.cmd.Wait(); close(p.done) }()
		ps = append(ps, p)
	}
	return ps, nil
}

// memBase is where the GPU sides' memory devices sit (BAR1's address).
const memBase = 0x20_0000_0000
