package bridgeagent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/app/apperr"
)

// TestSetupApply: good settings fill in Options; each bad one is a usage
// error naming its flag.
func TestSetupApply(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cred := filepath.Join(dir, "cred")
	os.WriteFile(cred, []byte("c0ffee\n"), 0o600)
	box := filepath.Join(dir, "box.json")
	os.WriteFile(box, []byte(`{"id":"box7","gpus":[{"id":"g0"}]}`), 0o600)
	strange := filepath.Join(dir, "strange.json")
	os.WriteFile(strange, []byte(`{"id":"box7","colour":"red"}`), 0o600)
	good := Setup{Role: "gpu", Listen: "127.0.0.1:4791", Switch: "127.0.0.1:8855", CredentialFile: cred, BoxFile: box, MemBase: "0x1000", MemSize: "1M"}
	var o Options
	if err := good.Apply(&o); err != nil {
		t.Fatal(err)
	}
	if o.Role != bridge.RoleGPU || o.Listen.Port() != 4791 || o.Switch.Port() != 8855 || o.Credential != "c0ffee" ||
		o.Box == nil || o.Box.ID != "box7" || o.MemBase != 0x1000 || o.MemSize != 1<<20 {
		t.Fatalf("%+v", o)
	}
	for want, bad := range map[string]func(*Setup){
		"--role":                  func(s *Setup) { s.Role = "middle" },
		"--listen":                func(s *Setup) { s.Listen = "x" },
		"--switch":                func(s *Setup) { s.Switch = "y" },
		"--agent-credential-file": func(s *Setup) { s.CredentialFile = "" },
		"no such file":            func(s *Setup) { s.CredentialFile = filepath.Join(dir, "none") },
		"--box is for":            func(s *Setup) { s.Role = "host" },
		"unknown field":           func(s *Setup) { s.BoxFile = strange },
		"--mem-base":              func(s *Setup) { s.MemBase = "low" },
		"--mem-size":              func(s *Setup) { s.MemSize = "lots" },
	} {
		s := good
		bad(&s)
		var o Options
		if err := s.Apply(&o); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a usage error naming it", want, err)
		}
	}
}
