package vm

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestDemo: a guest borrows an emulated H100 over a bridge pair on
// loopback UDP: it sees 10de:2330 class 0302 with BAR0 placed, reads the
// config space the GPU model has (apart from the documented differences),
// moves 64 MiB each way byte-identical, and launches and syncs a kernel.
func TestDemo(t *testing.T) {
	o := vmOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := Demo(ctx, DemoOptions{VM: o})
	b, _ := json.MarshalIndent(res, "", " ")
	t.Logf("demo: %s", b)
	if err != nil {
		t.Fatal(err)
	}
}
