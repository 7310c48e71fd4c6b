package replay

import (
	"context"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/model"
)

// TestAgreesWithModel sets the emulator's measured overhead beside the
// model's prediction for the shared traces: they must agree within 2
// percentage points (the model issue's acceptance) at 2, 10 and 20 us.
func TestAgreesWithModel(t *testing.T) {
	t.Parallel()
	privtest.Short(t, "replays several traces")
	for _, name := range []string{"alexnet-forward-a100.json.gz", "event-sync-multistream.json.gz", "cnn-train-v100.json.gz", "recsys-adagrad-a100.json.gz", "recsys-ddp-a100-rank0.json.gz"} {
		g := loadGraph(t, name)
		checks, err := model.Validate(context.Background(), Measurer{}, g, model.Native.WithRTT(0), []time.Duration{2 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range checks {
			t.Logf("%s rtt %v: predicted %.2f%% measured %.2f%% (native %v fabric %v)", name, c.RTT, c.PredictedPct, c.MeasuredPct, c.MeasuredNative, c.MeasuredFabric)
			if d := c.DifferencePoints; d > 2 || d < -2 {
				t.Errorf("%s rtt %v: emulator and model differ by %.2f points", name, c.RTT, d)
			}
		}
	}
}
