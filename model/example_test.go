package model_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/dxpu/dxpu/model"
	"github.com/dxpu/dxpu/model/trace"
)

// A kernel launched to an idle stream, then waited for: behind 10 us of
// added RTT the launch pays 15 us (doorbell one way, command fetch one round
// trip) and the synchronization 5 us (the completion's one way).
func Example() {
	const tr = `{"traceEvents":[
	{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":0,"dur":5,"args":{"correlation":1}},
	{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":10,"dur":100,"args":{"device":0,"stream":7,"correlation":1}},
	{"ph":"X","cat":"cuda_runtime","name":"cudaStreamSynchronize","pid":1,"tid":1,"ts":20,"dur":95,"args":{"correlation":2}},
	{"ph":"X","cat":"cuda_sync","name":"Stream Sync","pid":0,"tid":7,"ts":21,"dur":94,"args":{"cuda_sync_kind":"Stream Sync","device":0,"stream":7,"correlation":2}}]}`
	w, err := trace.Decode(strings.NewReader(tr))
	if err != nil {
		panic(err)
	}
	g, err := model.Build(w)
	if err != nil {
		panic(err)
	}
	p := g.Predict(model.Native.WithRTT(10 * time.Microsecond))
	fmt.Printf("baseline %v, predicted %v, overhead %.1f%%\n", p.Baseline, p.Predicted, p.OverheadPct)
	for _, c := range model.Causes {
		if p.Breakdown[c] > 0 {
			fmt.Printf("  %s %v\n", c, p.Breakdown[c])
		}
	}
	budget, _ := g.Budget(model.Native, 10)
	fmt.Printf("10%% budget: %v\n", budget.Round(10*time.Nanosecond))
	// Output:
	// baseline 115µs, predicted 135µs, overhead 17.4%
	//   launch 15µs
	//   sync 5µs
	// 10% budget: 5.75µs
}
