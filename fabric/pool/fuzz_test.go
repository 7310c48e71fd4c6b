package pool

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// FuzzDurationJSON: a duration that decodes re-encodes to the same value,
// and bad input is an error, never a panic.
func FuzzDurationJSON(f *testing.F) {
	for _, s := range []string{`"20us"`, `"1.5ms"`, `25000`, `"-3s"`, `""`, `"x"`, `1e9`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var d Duration
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			return
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back != d {
			t.Fatalf("%s -> %v -> %s -> %v (%v)", s, time.Duration(d), b, time.Duration(back), err)
		}
	})
}

// FuzzBoxRegistration feeds arbitrary JSON to box registration: it is
// either refused with ErrInvalid/ErrConflict, or accepted, in which case the
// pool stays consistent, reading the box back and registering it again is a
// no-op, and its GPUs are all allocatable.
func FuzzBoxRegistration(f *testing.F) {
	good, _ := json.Marshal(box("b", "p", "r", 3, "H100", 80<<10))
	f.Add(good)
	f.Add([]byte(`{"id":"b","bridge":{"switch_port":"p","mac":"02:00:00:00:00:01"},"gpus":[{"id":"g","model":"m","pcie_switch":-1}]}`))
	f.Add([]byte(`{"id":"","gpus":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Box
		if json.Unmarshal(data, &b) != nil {
			return
		}
		p := New()
		mustAdd(t, p, host("h", "p", "r"))
		got, err := p.AddBox(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrConflict) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			if len(p.Boxes()) != 0 {
				t.Fatal("refused box was stored")
			}
			return
		}
		check(t, p)
		again, err := p.AddBox(got)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("re-registering read-back box: %v\n%+v\n%+v", err, got, again)
		}
		healthy := 0
		for _, g := range got.GPUs {
			if g.Health == Healthy {
				healthy++
			}
		}
		if healthy > 0 && healthy <= MinHostPorts {
			a, err := p.Reserve("a", Request{Host: "h", Count: healthy})
			if err != nil || len(a.GPUs) != healthy {
				t.Fatalf("reserving all %d healthy GPUs: %v", healthy, err)
			}
			check(t, p)
		}
	})
}
