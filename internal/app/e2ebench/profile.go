package e2ebench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
)

// profiler writes one CPU profile per phase of a run (latency, copies)
// and, at the end, the mutex and block profiles of the whole run into a
// directory: where the wall-clock path spends its time and where its
// goroutines wait for each other.
type profiler struct {
	dir   string
	cpu   *os.File
	phase string
}

// Rates of the mutex and block profiles: every contention event, and
// blocking sampled about once per 10 us blocked (a round trip is tens of
// microseconds).
const (
	mutexFraction = 1
	blockRateNs   = 10_000
)

func newProfiler(dir string) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("e2ebench: profile directory: %w", err)
	}
	runtime.SetMutexProfileFraction(mutexFraction)
	runtime.SetBlockProfileRate(blockRateNs)
	return &profiler{dir: dir}, nil
}

// start ends the current phase's CPU profile, if any, and starts one for
// phase. A nil profiler does nothing.
func (p *profiler) start(phase string) error {
	if p == nil {
		return nil
	}
	if err := p.stopCPU(); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(p.dir, phase+".cpu.pprof"))
	if err != nil {
		return fmt.Errorf("e2ebench: profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("e2ebench: profile %s: %w", phase, err)
	}
	p.cpu, p.phase = f, phase
	return nil
}

func (p *profiler) stopCPU() error {
	if p.cpu == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.cpu.Close()
	p.cpu = nil
	if err != nil {
		return fmt.Errorf("e2ebench: profile %s: %w", p.phase, err)
	}
	return nil
}

// finish ends the CPU profile and writes the mutex and block profiles.
func (p *profiler) finish() error {
	if p == nil {
		return nil
	}
	err := p.stopCPU()
	for _, name := range []string{"mutex", "block"} {
		f, cerr := os.Create(filepath.Join(p.dir, name+".pprof"))
		if cerr != nil {
			return fmt.Errorf("e2ebench: profile: %w", cerr)
		}
		werr := pprof.Lookup(name).WriteTo(f, 0)
		if cerr = f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil && err == nil {
			err = fmt.Errorf("e2ebench: %s profile: %w", name, werr)
		}
	}
	runtime.SetMutexProfileFraction(0)
	runtime.SetBlockProfileRate(0)
	return err
}
