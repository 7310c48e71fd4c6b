package ctl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
)

// TestCountsInEnglish: ctl's lines about one GPU or one pair say so in
// the singular (they printed "1 GPUs" and "1 pairs ... have").
func TestCountsInEnglish(t *testing.T) {
	t.Parallel()
	o, dir := testManager(t, manager.Config{})
	boxFile, hostFile := filepath.Join(dir, "box.json"), filepath.Join(dir, "host.json")
	for f, data := range map[string]string{
		boxFile: `{"id":"box0","bridge":{"switch_port":"b0","mac":"02:00:00:00:01:00"},
		  "gpus":[{"id":"g0","model":"H100"},{"id":"g1","model":"H100"},{"id":"g2","model":"A100"}]}`,
		hostFile: `{"id":"h1","bridge":{"switch_port":"h1","mac":"02:00:00:00:02:01"},"ports":32}`,
	} {
		if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []func(context.Context, Options) error{
		func(ctx context.Context, o Options) error { return AddBox(ctx, o, boxFile) },
		func(ctx context.Context, o Options) error { return AddHost(ctx, o, hostFile) },
	} {
		if _, err := do(t, o, f); err != nil {
			t.Fatal(err)
		}
	}
	// One GPU of model A100, then two H100s of which one fails.
	var outs []string
	for _, req := range []pool.Request{{Host: "h1", Count: 1, Model: "A100"}, {Host: "h1", Count: 2, Model: "H100"}} {
		out, err := do(t, o, func(ctx context.Context, o Options) error { return Allocate(ctx, o, req) })
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
	}
	one := strings.Fields(outs[0][strings.Index(outs[0], "allocation "):])[1]
	one = strings.TrimSuffix(one, ":")
	for _, step := range []struct {
		f    func(context.Context, Options) error
		want string
	}{
		{nil, "allocation " + one + ": 1 GPU for host h1\n"},
		{func(ctx context.Context, o Options) error { return Rekey(ctx, o, []string{one}) }, ": 1 pair of host h1 has a new key\n"},
		{func(ctx context.Context, o Options) error { return SetHealth(ctx, o, "g0", pool.Unhealthy) }, "removed; 1 GPU remains\n"},
		{func(ctx context.Context, o Options) error { return Free(ctx, o, []string{one}) }, ": 1 GPU back from host h1\n"},
		// Left: the H100 allocation's pair of g1.
		{func(ctx context.Context, o Options) error { return Table(ctx, o) }, ", 1 pair\n"},
	} {
		out := outs[0]
		if step.f != nil {
			var err error
			if out, err = do(t, o, step.f); err != nil {
				t.Fatal(err)
			}
		}
		if !strings.Contains(out, step.want) || strings.Contains(out, " 1 GPUs") || strings.Contains(out, " 1 pairs") {
			t.Errorf("printed %q, want %q and no plural after 1", out, step.want)
		}
	}
}
