package ctl

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/table"
)

func where(l pool.Location) string {
	if l.Pod == "" && l.Rack == "" {
		return "-"
	}
	return l.Pod + "/" + l.Rack
}

func boxTable(w io.Writer, bs []pool.Box) {
	fmt.Fprintln(w, "BOX\tLOCATION\tBRIDGE\tGPUS\tFREE\tUSED\tUNHEALTHY\tSTATE")
	for _, b := range bs {
		free, used, bad := 0, 0, 0
		for _, g := range b.GPUs {
			switch {
			case g.Allocation != "":
				used++
			case g.Health != pool.Healthy:
				bad++
			default:
				free++
			}
		}
		state := "active"
		if b.Draining {
			state = "draining"
		}
		if b.Unreachable != nil { // its agent does not answer the manager; the GPUs stay as they are
			state += ",unreachable"
		}
		fmt.Fprintf(w, "%s\t%s\t%s %s\t%d\t%d\t%d\t%d\t%s\n", b.ID, where(b.Location), b.Bridge.SwitchPort, b.Bridge.MAC, len(b.GPUs), free, used, bad, state)
	}
}

func gpuTable(w io.Writer, gs []pool.GPU) {
	fmt.Fprintln(w, "GPU\tBOX\tMODEL\tMEMORY\tBDF\tSWITCH/PORT\tHEALTH\tALLOCATION")
	for _, g := range gs {
		a := g.Allocation
		if a == "" {
			a = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d MiB\t%s\t%d/%d\t%s\t%s\n", g.ID, g.Box, g.Model, g.MemoryMiB, g.BDF, g.Switch, g.Port, g.Health, a)
	}
}

func allocTable(w io.Writer, as []pool.Allocation) {
	fmt.Fprintln(w, "ALLOCATION\tHOST\tSTATE\tGPUS\tPAIRS\tLOST\tREASON")
	for _, a := range as {
		var gpus, pairs []string
		for _, g := range a.GPUs {
			gpus = append(gpus, g.GPU)
			pairs = append(pairs, fmt.Sprint(g.Pair))
		}
		lost := "-"
		if len(a.Lost) > 0 {
			lost = strings.Join(a.Lost, ",")
		}
		reason := "-"
		if a.Degraded != nil {
			reason = a.Degraded.Reason
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Host, a.State, strings.Join(gpus, ","), strings.Join(pairs, ","), lost, reason)
	}
}

func hostTable(w io.Writer, hs []pool.Host) {
	fmt.Fprintln(w, "HOST\tLOCATION\tBRIDGE\tPORTS\tUSED")
	for _, h := range hs {
		fmt.Fprintf(w, "%s\t%s\t%s %s\t%d\t%d\n", h.ID, where(h.Location), h.Bridge.SwitchPort, h.Bridge.MAC, h.Ports, h.UsedPorts)
	}
}

func printTable(w io.Writer, t table.Table) {
	fmt.Fprintf(w, "version %d, %s\n", t.Version, count(len(t.Pairs), "pair"))
	fmt.Fprintln(w, "PAIR\tHOST PORT\tHOST MAC\tHOST IP\tGPU PORT\tGPU MAC\tGPU IP")
	for _, p := range t.Pairs {
		fmt.Fprintf(w, "%d\t%s\t%s\t%v\t%s\t%s\t%v\n", p.ID, p.Host.Port, p.Host.MAC, p.Host.IP, p.GPU.Port, p.GPU.MAC, p.GPU.IP)
	}
}

func printEvent(w io.Writer, e ctlclient.Event) {
	var parts []string
	for _, kv := range [][2]string{{"allocation", e.Allocation}, {"host", e.Host}, {"box", e.Box}, {"gpus", strings.Join(e.GPUs, ",")}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if e.Pair != 0 {
		parts = append(parts, fmt.Sprintf("pair=%d", e.Pair))
	}
	if e.HostPort != nil {
		parts = append(parts, fmt.Sprintf("host_port=%d", *e.HostPort))
	}
	if e.Healthy != nil {
		parts = append(parts, fmt.Sprintf("healthy=%t", *e.Healthy))
	}
	if e.Reason != "" {
		parts = append(parts, fmt.Sprintf("reason=%q", e.Reason))
	}
	fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", e.Time.Format(time.RFC3339Nano), e.Seq, e.Type, strings.Join(parts, " "))
}
