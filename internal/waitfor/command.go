//go:build linux

package waitfor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// CommandStall is how long Command lets a command sit with no new output
// and no CPU used before it kills it: longer than Stall, since a command
// may wait on a lock or a disk while it works, and a runnable process on
// a loaded machine still gets some CPU every few seconds.
const CommandStall = time.Minute

// StallError is Command's error for a command it killed because it stood
// still: what was running in its process group then says what it was
// doing.
type StallError struct {
	Stall   time.Duration // how long nothing moved
	After   time.Duration // since the command started
	Running []string      // the group's processes when killed: "pid command line"
	Err     error         // what Wait returned after the kill
}

func (e *StallError) Error() string {
	running := "nothing"
	if len(e.Running) > 0 {
		running = strings.Join(e.Running, "; ")
	}
	return fmt.Sprintf("no output and no CPU for %v (killed after %v; running: %s): %v",
		e.Stall, e.After.Round(time.Second), running, e.Err)
}

func (e *StallError) Unwrap() error { return e.Err }

// Command runs cmd in a process group of its own and waits for it. It
// kills the group, and returns a *StallError, when for stall neither
// cmd's output grew nor any process of the group used CPU: a build or a
// boot that is slow on a loaded machine keeps going, one stuck waiting
// does not. Output to an *os.File counts by its size (a file, unlike a
// pipe, is not held open by daemons the command leaves behind); to any
// other writer, by the bytes written. Processes the command leaves in
// the background stay in its group (see GroupCPU) after it returns.
func Command(cmd *exec.Cmd, stall time.Duration) error {
	return CommandGuarded(cmd, stall, nil)
}

// CommandGuarded is Command with the command's process group added to g
// (if not nil) as soon as it starts, so that it dies with this process
// even while Command waits; once the command returns, a group with
// nothing left running in it is forgotten, and one with daemons in the
// background stays listed until the caller's g.Kill.
func CommandGuarded(cmd *exec.Cmd, stall time.Duration, g *GroupGuard) (err error) {
	var written atomic.Int64
	var files []*os.File
	wrap := func(w io.Writer) io.Writer {
		if f, ok := w.(*os.File); ok {
			files = append(files, f)
			return w
		}
		if w == nil {
			return nil
		}
		return countWriter{w, &written}
	}
	if sameWriter(cmd.Stdout, cmd.Stderr) {
		cmd.Stdout = wrap(cmd.Stdout)
		cmd.Stderr = cmd.Stdout
	} else {
		cmd.Stdout, cmd.Stderr = wrap(cmd.Stdout), wrap(cmd.Stderr)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	pgid := cmd.Process.Pid
	if g != nil {
		if gerr := g.Add(pgid); gerr != nil {
			syscall.Kill(-pgid, syscall.SIGKILL)
			cmd.Wait()
			return gerr
		}
		defer func() {
			if !GroupAlive(pgid) {
				err = errors.Join(err, g.Forget(pgid))
			}
		}()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	progress := func() uint64 {
		p := uint64(written.Load())
		for _, f := range files {
			if st, err := f.Stat(); err == nil {
				p += uint64(st.Size())
			}
		}
		cpu, _ := groupCPU(pgid, false)
		return p + cpu
	}
	w := newWatch(nil, "", stall)
	w.last = progress()
	poll := time.NewTicker(min(max(stall/20, 10*time.Millisecond), time.Second))
	defer poll.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-poll.C:
		}
		if !w.stalled(progress()) {
			continue
		}
		_, running := groupCPU(pgid, true)
		syscall.Kill(-pgid, syscall.SIGKILL)
		return &StallError{Stall: stall, After: time.Since(start), Running: running, Err: <-done}
	}
}

// sameWriter reports whether a and b are one writer, as exec.Cmd compares
// them (== where the type allows it).
func sameWriter(a, b io.Writer) bool {
	return a != nil && reflect.TypeOf(a).Comparable() && a == b
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// GroupCPU is the CPU, in clock ticks, that the live processes of the
// process groups pgids have used, with that of the children they reaped
// (a build's finished compiler runs count through the build). Its changes
// are a process tree's progress; it may drop when a member exits into a
// parent outside the groups.
func GroupCPU(pgids ...int) uint64 {
	var sum uint64
	for _, g := range pgids {
		c, _ := groupCPU(g, false)
		sum += c
	}
	return sum
}

// ProcessCPU is the CPU, in clock ticks, that process pid has used, with
// that of the children it reaped; 0 once it is gone.
func ProcessCPU(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	_, cpu, _ := parseStat(string(b))
	return cpu
}

// GroupAlive reports whether process group pgid has a member that has not
// exited (a zombie has: its sockets and files are closed).
func GroupAlive(pgid int) bool {
	alive := false
	eachMember(pgid, func(_, stat string) bool {
		i := strings.LastIndexByte(stat, ')')
		alive = i+2 < len(stat) && stat[i+2] != 'Z'
		return !alive
	})
	return alive
}

// groupCPU sums the CPU of process group pgid's members and, with names,
// lists them ("pid command line").
func groupCPU(pgid int, names bool) (uint64, []string) {
	var sum uint64
	var running []string
	eachMember(pgid, func(pid, stat string) bool {
		_, cpu, _ := parseStat(stat)
		sum += cpu
		if names {
			running = append(running, pid+" "+cmdline(pid))
		}
		return true
	})
	return sum, running
}

// eachMember calls fn with the PID and /proc stat line of each member of
// process group pgid, until fn returns false.
func eachMember(pgid int, fn func(pid, stat string) bool) {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	ents, _ := d.Readdirnames(-1)
	d.Close()
	for _, e := range ents {
		if e[0] < '0' || e[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		if g, _, ok := parseStat(string(b)); ok && g == pgid && !fn(e, string(b)) {
			return
		}
	}
}

// parseStat reads a /proc/PID/stat line's process group and its utime,
// stime, cutime and cstime summed.
func parseStat(s string) (pgid int, cpu uint64, ok bool) {
	// The command name may hold spaces and parentheses: the fields
	// start after its last ')'. After it: state ppid pgrp ... with utime
	// the 12th, and stime, cutime, cstime after it.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, 0, false
	}
	pgid, err := strconv.Atoi(f[2])
	if err != nil {
		return 0, 0, false
	}
	for _, v := range f[11:15] {
		n, err := strconv.ParseInt(v, 10, 64) // cutime is signed
		if err != nil {
			return 0, 0, false
		}
		cpu += uint64(max(n, 0))
	}
	return pgid, cpu, true
}

// cmdline is a process's command line, shortened, or its name for a
// kernel thread or a zombie.
func cmdline(pid string) string {
	b, err := os.ReadFile("/proc/" + pid + "/cmdline")
	s := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if err != nil || s == "" {
		b, _ = os.ReadFile("/proc/" + pid + "/comm")
		s = "[" + strings.TrimSpace(string(b)) + "]"
	}
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// Exited reports whether the process pid running comm has ended: no such
// process, a zombie, or its PID another command's now.
func Exited(pid int, comm string) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil || !strings.Contains(string(st), "("+comm+")") {
		return true
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}
