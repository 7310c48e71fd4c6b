package linkbench

import (
	"context"
	"testing"
	"time"
)

func TestDebugCounters(t *testing.T) {
	r, err := Run(context.Background(), Options{Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("host %+v", r.Host)
	t.Logf("gpu %+v", r.GPU)
}
