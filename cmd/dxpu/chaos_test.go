package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestChaosSchedule: the same seed prints the same schedule, another seed
// another, and nothing runs.
func TestChaosSchedule(t *testing.T) {
	a, _, err := runDxpu(t, "", "chaos", "--seed", "3", "--duration", "30s", "--schedule")
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := runDxpu(t, "", "chaos", "--seed", "3", "--duration", "30s", "--schedule")
	c, _, _ := runDxpu(t, "", "chaos", "--seed", "4", "--duration", "30s", "--schedule")
	if a != b || a == c || !strings.HasPrefix(a, "schedule (") || strings.Count(a, "\n") < 6 {
		t.Fatalf("seed 3 printed\n%s\nthen\n%s\nseed 4\n%s", a, b, c)
	}
}

func TestChaosBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"chaos", "--duration", "2s"},
		{"chaos", "--net", "300", "--schedule"},
		{"chaos", "--converge-bound", "0s"},
		{"chaos", "--dxpu", "/nonexistent/dxpu"},
	} {
		out, _, err := runDxpu(t, "", args...)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 || out != "" || strings.Contains(ec.err.Error(), "\n") {
			t.Errorf("dxpu %v: stdout %q, err %v; want exit 2 with one line and no report", args, out, err)
		}
	}
}

// TestChaosCampaign runs a short campaign of the real daemons as a
// process and checks that it ran: operations, faults of several kinds,
// observations, a report. Its violations are logged, not judged: the
// manager's key lifecycle is being fixed; once it is, this asserts none.
func TestChaosCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("a 25s campaign of six daemons; skipped under -short")
	}
	bin := filepath.Join(t.TempDir(), "dxpu")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/dxpu/dxpu/cmd/dxpu").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "chaos", "--duration", "25s", "--seed", "1", "--json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: violations found
		t.Fatalf("dxpu chaos: %v\n%s", err, stderr.String())
	}
	var rep struct {
		Seed             int64          `json:"seed"`
		Schedule         []any          `json:"schedule"`
		Operations       int            `json:"operations"`
		OperationsByName map[string]any `json:"operations_by_name"`
		Faults           int            `json:"faults"`
		FaultsByKind     map[string]int `json:"faults_by_kind"`
		Observations     int            `json:"observations"`
		Converged        bool           `json:"converged"`
		WorstConvergeMS  int64          `json:"worst_converge_ms"`
		Violations       []struct {
			Kind    string   `json:"kind"`
			Subject string   `json:"subject"`
			AtMS    int64    `json:"at_ms"`
			Message string   `json:"message"`
			Excerpt []string `json:"excerpt"`
		} `json:"violations"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if rep.Seed != 1 || rep.Operations == 0 || rep.OperationsByName["alloc"] == nil || rep.Observations == 0 ||
		rep.Faults != len(rep.Schedule) || len(rep.FaultsByKind) < 4 {
		t.Fatalf("the campaign did not run: %s", stdout.String())
	}
	if (err == nil) != (len(rep.Violations) == 0) {
		t.Fatalf("exit %v with %d violations", err, len(rep.Violations))
	}
	t.Logf("seed 1: %d operations, faults %v, %d observations, converged %v (worst %dms), %d violations",
		rep.Operations, rep.FaultsByKind, rep.Observations, rep.Converged, rep.WorstConvergeMS, len(rep.Violations))
	for _, v := range rep.Violations {
		t.Logf("VIOLATION %s %s at %dms: %s\n    %s", v.Kind, v.Subject, v.AtMS, v.Message, strings.Join(v.Excerpt, "\n    "))
	}
}
