package cuda

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/dxpu/dxpu/emu/gpu"
)

// Profiler records what the blocking API did, as a PyTorch profiler
// (Kineto) Chrome trace: cuda_runtime events for calls, kernel, gpu_memcpy
// and gpu_memset events for GPU work (timed by the GPU itself), cuda_sync
// records for synchronizations, all linked by correlation IDs. The
// performance model reads the result like any other trace, which is how
// the demo predicts its bundled workloads.
type Profiler struct {
	events  []profEvent
	streams map[uint32]int // correlation -> stream
	devices map[uint32]int
	origin  time.Duration
}

type profEvent struct {
	Ph   string         `json:"ph"`
	Cat  string         `json:"cat"`
	Name string         `json:"name"`
	Pid  any            `json:"pid"`
	Tid  any            `json:"tid"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	Args map[string]any `json:"args"`
}

// Profile starts recording on c; attach the GPUs with Profiler.AttachGPU.
func (c *Context) Profile() *Profiler {
	p := &Profiler{streams: map[uint32]int{}, devices: map[uint32]int{}}
	c.prof = p
	return p
}

// AttachGPU records the GPU-side events of device index dev.
func (p *Profiler) AttachGPU(dev int, g *gpu.GPU) {
	prev := g.OnOp
	g.OnOp = func(cmd gpu.Command, start, end time.Duration) {
		if prev != nil {
			prev(cmd, start, end)
		}
		if cmd.Marker == 0 {
			return
		}
		st := p.streams[cmd.Marker]
		args := map[string]any{"device": dev, "stream": st, "correlation": cmd.Marker}
		e := profEvent{Ph: "X", Pid: dev, Tid: st, Ts: us(start), Dur: us(end - start), Args: args}
		switch cmd.Op {
		case gpu.OpKernel:
			e.Cat, e.Name = "kernel", "emu_kernel"
		case gpu.OpCopy:
			e.Cat = "gpu_memcpy"
			args["bytes"] = cmd.Len
			switch cmd.Dir {
			case gpu.DirH2D:
				e.Name = "Memcpy HtoD (Pinned -> Device)"
			case gpu.DirD2H:
				e.Name = "Memcpy DtoH (Device -> Pinned)"
			default:
				e.Name = "Memcpy DtoD (Device -> Device)"
			}
		case gpu.OpMemset:
			e.Cat, e.Name = "gpu_memset", "Memset (Device)"
			args["bytes"] = cmd.Len
		default:
			return
		}
		p.events = append(p.events, e)
	}
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

func (c *Context) nextCorr() uint32 {
	c.corr++
	return c.corr
}

// call records a runtime call that began at start and ends now.
func (c *Context) call(name string, start time.Duration, corr uint32) {
	if c.prof == nil {
		return
	}
	c.prof.events = append(c.prof.events, profEvent{Ph: "X", Cat: "cuda_runtime", Name: name, Pid: 1, Tid: 1,
		Ts: us(start), Dur: us(c.Now() - start), Args: map[string]any{"correlation": corr}})
}

// sync records the GPU-side record of a synchronization.
func (c *Context) sync(kind string, start time.Duration, corr uint32, args map[string]any) {
	if c.prof == nil {
		return
	}
	args["correlation"] = corr
	args["cuda_sync_kind"] = kind
	c.prof.events = append(c.prof.events, profEvent{Ph: "X", Cat: "cuda_sync", Name: kind, Pid: 0, Tid: 0,
		Ts: us(start), Dur: us(c.Now() - start), Args: args})
}

func (c *Context) noteStream(corr uint32, st *Stream) {
	if c.prof != nil {
		c.prof.streams[corr] = st.id()
	}
}

// id is the stream number written into traces (7 for the first, as
// PyTorch's default stream shows up).
func (st *Stream) id() int { return 7 + st.ch.Index() }

// WriteTrace writes the recorded trace as Chrome-trace JSON.
func (p *Profiler) WriteTrace(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if _, err := io.WriteString(bw, `{"schemaVersion": 1, "traceName": "dxpu emulator", "traceEvents": [`+"\n"); err != nil {
		return err
	}
	enc := json.NewEncoder(bw)
	for i, e := range p.events {
		if i > 0 {
			if _, err := io.WriteString(bw, ","); err != nil {
				return err
			}
		}
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("cuda: writing trace event %d: %w", i, err)
		}
	}
	if _, err := io.WriteString(bw, "]}\n"); err != nil {
		return err
	}
	return bw.Flush()
}

// Events returns how many events were recorded.
func (p *Profiler) Events() int { return len(p.events) }
