package cpuset

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
	}{
		{"3", "3"},
		{"0-3", "0-3"},
		{"0-1,8,10-11", "0-1,8,10-11"},
		{"5,1,3,2", "1-3,5"},
		{"2,2,1-3", "1-3"},
		{" 4 , 6-7", "4,6-7"},
		{"1023", "1023"},
	} {
		s, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if s.String() != c.want {
			t.Errorf("Parse(%q) = %v, want %s", c.in, s, c.want)
		}
	}
	for _, c := range []struct{ in, says string }{
		{"", "empty"},
		{"a", `"a" is not a CPU number`},
		{"1,,2", `"" is not a CPU number`},
		{"3-1", "runs backwards"},
		{"-1", `"" is not a CPU number`},
		{"1024", "above 1023"},
		{"0-99999999999", "above 1023"},
		{"0-99999999999999999999", "not a CPU number"},
	} {
		_, err := Parse(c.in)
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Parse(%q) = %v, want ErrSyntax saying %q", c.in, err, c.says)
		}
	}
}

// pinChildEnv makes the test binary a child that pins itself to the CPU
// list in the variable and reports its threads' masks.
const pinChildEnv = "DXPU_CPUSET_CHILD"

func TestMain(m *testing.M) {
	if list := os.Getenv(pinChildEnv); list != "" {
		os.Exit(pinChild(list))
	}
	os.Exit(m.Run())
}

// pinChild starts threads before and after Pin (goroutines locked to
// their threads force new ones) and prints every thread's mask and
// GOMAXPROCS, or the error.
func pinChild(list string) int {
	s, err := Parse(list)
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		return 0
	}
	release := make(chan struct{})
	var wg sync.WaitGroup
	lockThreads := func(n int) {
		for range n {
			wg.Add(1)
			started := make(chan struct{})
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				close(started)
				<-release
			}()
			<-started
		}
	}
	lockThreads(4)
	if err := Pin(s); err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		return 0
	}
	lockThreads(4)
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		var m unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &m); err != nil {
			continue
		}
		var got Set
		for c := 0; c <= MaxCPU; c++ {
			if m.IsSet(c) {
				got = append(got, c)
			}
		}
		os.Stdout.WriteString("thread " + task.Name() + " " + got.String() + "\n")
	}
	os.Stdout.WriteString("gomaxprocs " + strconv.Itoa(runtime.GOMAXPROCS(0)) + "\n")
	close(release)
	wg.Wait()
	return 0
}

func runPinChild(t *testing.T, list string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), pinChildEnv+"="+list)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return string(out)
}

// TestPinEveryThread pins a process with threads already running and
// checks every thread, old and new, runs on the set, and GOMAXPROCS is
// its size.
func TestPinEveryThread(t *testing.T) {
	allowed := Allowed()
	if len(allowed) == 0 {
		t.Fatal("no CPU allowed to this process")
	}
	one := Set{allowed[len(allowed)-1]}
	out := runPinChild(t, one.String())
	threads := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "thread":
			threads++
			if f[2] != one.String() {
				t.Errorf("thread %s runs on CPUs %s, want %v", f[1], f[2], one)
			}
		case len(f) == 2 && f[0] == "gomaxprocs":
			if f[1] != "1" {
				t.Errorf("GOMAXPROCS %s, want 1", f[1])
			}
		default:
			t.Errorf("child said %q", line)
		}
	}
	// The main thread, the runtime's, and 8 locked ones.
	if threads < 9 {
		t.Errorf("only %d threads reported:\n%s", threads, out)
	}
}

// TestPinRefusesCPUNotAllowed: a CPU outside the process's mask is named,
// and nothing is pinned to the rest.
func TestPinRefusesCPUNotAllowed(t *testing.T) {
	allowed := Allowed()
	out := runPinChild(t, strconv.Itoa(allowed[0])+","+strconv.Itoa(MaxCPU))
	if !strings.Contains(out, "error: cpuset: CPU 1023 is not one this process may run on") {
		t.Fatalf("child said %q, want the refusal of CPU 1023", out)
	}
}
