package jsonfile

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/pool"
	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/app/apperr"
)

// decodeRoundTrip decodes data as a T (a box or host file); a value that
// decodes must encode and decode to itself.
func decodeRoundTrip[T any](t *testing.T, data []byte) error {
	v, err := Decode[T]("box.json", data)
	if err != nil {
		return err
	}
	b, merr := json.Marshal(v)
	if merr != nil {
		t.Fatal(merr)
	}
	again, err := Decode[T]("box.json", b)
	if err != nil || !reflect.DeepEqual(again, v) {
		t.Fatalf("%s decoded to %+v, which encodes to %s, which decodes to %+v (%v)", data, v, b, again, err)
	}
	return nil
}

// FuzzDecode reads an arbitrary box, host or switch table file as `dxpu
// ctl add-box`, `add-host`, `bridge agent --box` and `switch --table`
// read theirs. Invariants: a refusal is one non-empty line that names the
// file and is a usage error (box, host), or names the file (table); an
// accepted box or host passes Validate and round-trips.
func FuzzDecode(f *testing.F) {
	box, _ := json.Marshal(pool.Box{ID: "b", Bridge: pool.Endpoint{SwitchPort: "p1", MAC: "02:00:00:00:00:01", IP: "10.0.0.1", UDPPort: 4791},
		GPUs: []pool.GPU{{ID: "b-0", Model: "H100", MemoryMiB: 81920, BDF: "0000:41:00.0"}}})
	host, _ := json.Marshal(pool.Host{ID: "h", Bridge: pool.Endpoint{SwitchPort: "p2", MAC: "02:00:00:00:00:02"}, Ports: 32})
	for kind := uint8(0); kind < 3; kind++ {
		f.Add(kind, box)
		f.Add(kind, host)
		f.Add(kind, []byte(`{"version":3,"pairs":[{"id":7,"host":{"port":"a","mac":"02:00:00:00:00:01"},"gpu":{"port":"b","mac":"02:00:00:00:00:02"}}]}`))
	}
	f.Add(uint8(0), []byte("{\n  \"id\": \"b\",\n  \"gpus\": [{\"memory_mib\": -1}]\n}"))
	f.Add(uint8(1), []byte(`{"id":"h","ports":"32"}`))
	f.Add(uint8(0), []byte(`{"id":"b"} {"id":"c"}`))
	f.Add(uint8(2), []byte(`{"pairs":[{"id":"7"}]}`))
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		var err error
		switch kind % 3 {
		case 0:
			err = decodeRoundTrip[pool.Box](t, data)
		case 1:
			err = decodeRoundTrip[pool.Host](t, data)
		case 2:
			path := filepath.Join(t.TempDir(), "table.json")
			if werr := os.WriteFile(path, data, 0o600); werr != nil {
				t.Fatal(werr)
			}
			if _, lerr := switching.LoadTable(path); lerr != nil {
				err = ExplainFile(lerr, path, switching.TableFileForm)
				if !strings.Contains(err.Error(), path) {
					t.Fatalf("table error %q does not name the file", err)
				}
			}
		}
		if err == nil {
			return
		}
		msg := err.Error()
		if msg == "" || strings.ContainsAny(msg, "\r\n") {
			t.Fatalf("error is not one line: %q", msg)
		}
		if kind%3 != 2 && (!errors.Is(err, apperr.ErrUsage) || !strings.HasPrefix(msg, "box.json")) {
			t.Fatalf("error %q is not a usage error naming the file", msg)
		}
	})
}
