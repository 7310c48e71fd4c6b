package demo

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/emu/cuda"
)

// Bundled is a workload written against the emulated driver, in the style
// of a framework's inner loop: CPU-side launch overheads, kernels of given
// durations, copies and synchronizations.
type Bundled struct {
	Name string
	GPUs int
	Run  func(c *cuda.Context) error
}

// BundledWorkloads are the demo's own workloads.
func BundledWorkloads() []Bundled {
	return []Bundled{
		{Name: "mlp-train (bundled)", GPUs: 1, Run: mlpTrain},
		{Name: "bert-infer-bs1 (bundled)", GPUs: 1, Run: bertInfer},
		{Name: "resnet-dp4 (bundled)", GPUs: 4, Run: dataParallel},
		{Name: "h2d-stream-256MiB (bundled)", GPUs: 1, Run: h2dStream},
	}
}

const us = time.Microsecond

// mlpTrain is a small MLP training loop: per step one batch copied in,
// forward, loss read back (a synchronous 4-byte copy, as loss.item()
// does), backward and optimizer kernels, 40 steps.
func mlpTrain(c *cuda.Context) error {
	d := c.Devices[0]
	st, err := d.NewStream()
	if err != nil {
		return err
	}
	batch, loss := c.MallocHost(2<<20), c.MallocHost(4)
	dBatch, dLoss := d.Malloc(2<<20), d.Malloc(4)
	fwd := []time.Duration{45 * us, 30 * us, 12 * us, 5 * us}
	bwd := []time.Duration{40 * us, 25 * us, 30 * us, 18 * us, 10 * us, 6 * us}
	for step := 0; step < 40; step++ {
		c.CPU(30 * us) // data loader and Python
		if err := c.MemcpyHtoDAsync(st, dBatch, batch, 2<<20); err != nil {
			return err
		}
		for _, k := range fwd {
			c.CPU(8 * us)
			if err := c.Launch(st, k); err != nil {
				return err
			}
		}
		if err := c.MemcpyDtoH(st, loss, dLoss, 4); err != nil {
			return err
		}
		for _, k := range bwd {
			c.CPU(8 * us)
			if err := c.Launch(st, k); err != nil {
				return err
			}
		}
		for i := 0; i < 6; i++ { // optimizer
			c.CPU(5 * us)
			if err := c.Launch(st, 8*us); err != nil {
				return err
			}
		}
	}
	return c.StreamSynchronize(st)
}

// bertInfer serves 100 single requests: tokens in, 24 short kernels,
// logits out, synchronously, as a latency-bound inference server does.
func bertInfer(c *cuda.Context) error {
	d := c.Devices[0]
	st, err := d.NewStream()
	if err != nil {
		return err
	}
	in, out := c.MallocHost(16<<10), c.MallocHost(4<<10)
	dIn, dOut := d.Malloc(16<<10), d.Malloc(4<<10)
	for r := 0; r < 100; r++ {
		c.CPU(40 * us) // tokenizer, request handling
		if err := c.MemcpyHtoDAsync(st, dIn, in, 16<<10); err != nil {
			return err
		}
		for k := 0; k < 24; k++ {
			c.CPU(6 * us)
			if err := c.Launch(st, time.Duration(12+k%4*4)*us); err != nil {
				return err
			}
		}
		if err := c.MemcpyDtoH(st, out, dOut, 4<<10); err != nil {
			return err
		}
	}
	return nil
}

// dataParallel trains on 4 GPUs: each step every GPU gets its batch,
// computes, sends its 24 MiB of gradients to the host, the CPU reduces
// them, and the parameters go back to every GPU.
func dataParallel(c *cuda.Context) error {
	if len(c.Devices) < 4 {
		return fmt.Errorf("demo: resnet-dp4 needs 4 GPUs, have %d", len(c.Devices))
	}
	const batch, grads = 8 << 20, 24 << 20
	var sts []*cuda.Stream
	var hb, hg, db, dg []uint64
	for _, d := range c.Devices[:4] {
		st, err := d.NewStream()
		if err != nil {
			return err
		}
		sts = append(sts, st)
		hb, hg = append(hb, c.MallocHost(batch)), append(hg, c.MallocHost(grads))
		db, dg = append(db, d.Malloc(batch)), append(dg, d.Malloc(grads))
	}
	for step := 0; step < 8; step++ {
		for i, st := range sts {
			if err := c.MemcpyHtoDAsync(st, db[i], hb[i], batch); err != nil {
				return err
			}
			for k := 0; k < 20; k++ {
				c.CPU(4 * us)
				if err := c.Launch(st, 150*us); err != nil {
					return err
				}
			}
			if err := c.MemcpyDtoHAsync(st, hg[i], dg[i], grads); err != nil {
				return err
			}
		}
		for _, st := range sts {
			if err := c.StreamSynchronize(st); err != nil {
				return err
			}
		}
		c.CPU(500 * us) // reduce on the CPU
		for i, st := range sts {
			if err := c.MemcpyHtoDAsync(st, dg[i], hg[i], grads); err != nil {
				return err
			}
		}
		for _, st := range sts {
			if err := c.StreamSynchronize(st); err != nil {
				return err
			}
		}
	}
	return nil
}

// h2dStream feeds a GPU 256 MiB in 32 MiB pinned copies, each followed by a
// 1 ms kernel on another stream, like a data-loading pipeline.
func h2dStream(c *cuda.Context) error {
	d := c.Devices[0]
	cp, err := d.NewStream()
	if err != nil {
		return err
	}
	comp, err := d.NewStream()
	if err != nil {
		return err
	}
	const chunk = 32 << 20
	h, dv := c.MallocHost(chunk), d.Malloc(chunk)
	for i := 0; i < 8; i++ {
		if err := c.MemcpyHtoDAsync(cp, dv, h, chunk); err != nil {
			return err
		}
		ev := d.NewEvent()
		if err := c.EventRecord(ev, cp); err != nil {
			return err
		}
		if err := c.StreamWaitEvent(comp, ev); err != nil {
			return err
		}
		if err := c.Launch(comp, time.Millisecond); err != nil {
			return err
		}
	}
	if err := c.StreamSynchronize(cp); err != nil {
		return err
	}
	return c.StreamSynchronize(comp)
}
