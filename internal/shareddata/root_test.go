package shareddata

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mkfile writes content to dir/rel, creating the directories on the way.
func mkfile(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, dir, rel string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, rel), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestModulePath(t *testing.T) {
	if modulePath != "github.com/dxpu/dxpu" {
		t.Fatalf("modulePath %q", modulePath)
	}
}

func TestFind(t *testing.T) {
	tmp := t.TempDir()
	// tmp/a: dxpu with shared beside it, and a foreign module inside.
	mkfile(t, tmp, "a/dxpu/go.mod", "// dxpu\nmodule "+modulePath+"\n\ngo 1.26\n")
	mkfile(t, tmp, "a/dxpu/tools/go.mod", "module example.com/tools\n")
	mkdir(t, tmp, "a/dxpu/tools/x")
	mkdir(t, tmp, "a/dxpu/internal/shareddata")
	mkdir(t, tmp, "a/shared")
	// tmp/b: dxpu without shared beside it.
	mkfile(t, tmp, "b/dxpu/go.mod", "module "+modulePath+"\n")
	mkdir(t, tmp, "b/dxpu/pkg")
	// tmp/c: no module at all.
	mkdir(t, tmp, "c/d")

	srcA := filepath.Join(tmp, "a/dxpu/internal/shareddata/root.go")
	srcB := filepath.Join(tmp, "b/dxpu/internal/shareddata/root.go")
	want := filepath.Join(tmp, "a/shared")
	for _, c := range []struct {
		name, start, src string
		found            bool
	}{
		{"module root", filepath.Join(tmp, "a/dxpu"), "", true},
		{"package dir", filepath.Join(tmp, "a/dxpu/internal/shareddata"), "", true},
		{"past a foreign go.mod", filepath.Join(tmp, "a/dxpu/tools/x"), "", true},
		{"relative start", relTo(t, filepath.Join(tmp, "a/dxpu/tools/x")), "", true},
		{"source location when outside the module", filepath.Join(tmp, "c/d"), srcA, true},
		{"source location when no shared beside the start", filepath.Join(tmp, "b/dxpu/pkg"), srcA, true},
		{"working directory wins", filepath.Join(tmp, "a/dxpu"), srcB, true},
		{"no shared anywhere", filepath.Join(tmp, "b/dxpu/pkg"), srcB, false},
		{"outside, no source", filepath.Join(tmp, "c/d"), "", false},
		{"trimpath source", filepath.Join(tmp, "c/d"), modulePath + "/internal/shareddata/root.go", false},
		{"nothing to go on", "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := find(c.start, c.src)
			if c.found {
				if err != nil || got != want {
					t.Fatalf("find = %q, %v; want %q", got, err, want)
				}
				return
			}
			if !errors.Is(err, ErrNotFound) || got != "" {
				t.Fatalf("find = %q, %v; want ErrNotFound", got, err)
			}
			t.Log(err)
		})
	}
	// The error names where it looked.
	_, err := find(filepath.Join(tmp, "b/dxpu/pkg"), "")
	if err == nil || !strings.Contains(err.Error(), filepath.Join(tmp, "b/dxpu/../shared")) {
		t.Errorf("error %v does not name %s", err, filepath.Join(tmp, "b/shared"))
	}
}

// relTo returns p relative to the working directory.
func relTo(t *testing.T, p string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	r, err := filepath.Rel(wd, p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestIsModuleRoot(t *testing.T) {
	for _, c := range []struct {
		gomod string
		want  bool
	}{
		{"module " + modulePath + "\n", true},
		{"// comment\n\nmodule\t" + modulePath + " // trailing\n", true},
		{`module "` + modulePath + `"` + "\n", true},
		{"module " + modulePath + "2\n", false},
		{"module example.com/other\n", false},
		{"modulex " + modulePath + "\n", false},
		{"go 1.26\n", false},
		{"", false},
	} {
		dir := t.TempDir()
		mkfile(t, dir, "go.mod", c.gomod)
		if got := isModuleRoot(dir); got != c.want {
			t.Errorf("go.mod %q: isModuleRoot %v, want %v", c.gomod, got, c.want)
		}
	}
	if isModuleRoot(t.TempDir()) {
		t.Error("a directory without go.mod is a module root")
	}
}

// TestRoot checks Root against ../shared beside this checkout: found
// exactly when it exists.
func TestRoot(t *testing.T) {
	want, err := filepath.Abs(filepath.Join("..", "..", "..", "shared"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Root()
	if st, serr := os.Stat(want); serr == nil && st.IsDir() {
		if err != nil || got != want {
			t.Fatalf("Root = %q, %v; want %q", got, err, want)
		}
		return
	}
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Root = %q, %v without %s; want ErrNotFound", got, err, want)
	}
	if Required() {
		t.Fatalf("%s=1 but %v", RequireEnv, err)
	}
}

// TestFindModule: the module root is found from the working directory
// first, then from the source location; the error says where it looked.
func TestFindModule(t *testing.T) {
	tmp := t.TempDir()
	mkfile(t, tmp, "a/dxpu/go.mod", "module "+modulePath+"\n")
	mkfile(t, tmp, "a/dxpu/tools/go.mod", "module example.com/tools\n")
	mkdir(t, tmp, "a/dxpu/tools/x")
	mkfile(t, tmp, "b/dxpu/go.mod", "module "+modulePath+"\n")
	mkdir(t, tmp, "c/d")
	srcB := filepath.Join(tmp, "b/dxpu/internal/shareddata/root.go")
	for _, c := range []struct {
		name, start, src, want string
	}{
		{"past a foreign go.mod", filepath.Join(tmp, "a/dxpu/tools/x"), srcB, filepath.Join(tmp, "a/dxpu")},
		{"source location when outside", filepath.Join(tmp, "c/d"), srcB, filepath.Join(tmp, "b/dxpu")},
		{"nowhere", filepath.Join(tmp, "c/d"), modulePath + "/internal/shareddata/root.go", ""},
		{"nothing to go on", "", "", ""},
	} {
		got, err := findModule(c.start, c.src)
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("%s: findModule = %q, %v; want %q", c.name, got, err, c.want)
		}
		if c.want == "" && c.start != "" && (err == nil || !strings.Contains(err.Error(), c.start)) {
			t.Errorf("%s: error %v does not say where it looked", c.name, err)
		}
	}
	wd, _ := os.Getwd()
	if got, err := ModuleRoot(); err != nil || got != filepath.Dir(filepath.Dir(wd)) {
		t.Errorf("ModuleRoot = %q, %v; want %q", got, err, filepath.Dir(filepath.Dir(wd)))
	}
}
