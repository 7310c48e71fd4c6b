package jsonfile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/apperr"
)

func TestFields(t *testing.T) {
	t.Parallel()
	got := strings.Join(Fields(reflect.TypeFor[pool.Box]()), " ")
	for _, want := range []string{"id", "bridge.switch_port", "gpus[].memory_mib", "location.pod"} {
		if !strings.Contains(" "+got+" ", " "+want+" ") {
			t.Errorf("%q missing from %s", want, got)
		}
	}
}

// TestReadRefusesUnknownFields: the error names the stranger, the file and
// the fields the type accepts.
func TestReadRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "box.json")
	os.WriteFile(f, []byte(`{"id":"b","gpus":[{"id":"g","mem_mib":1}]}`), 0o600)
	_, err := Read[pool.Box](nil, f)
	if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), `unknown field "mem_mib"`) ||
		!strings.Contains(err.Error(), "gpus[].memory_mib") || !strings.Contains(err.Error(), f) {
		t.Fatalf("%v", err)
	}
	b, err := Read[pool.Box](strings.NewReader(`{"id":"b2"}`), "-")
	if err != nil || b.ID != "b2" {
		t.Fatalf("stdin: %+v %v", b, err)
	}
}
