package shareddata

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
)

// RequireEnv names the environment variable that, set to "1", turns every
// skip for missing shared files into a test failure.
const RequireEnv = "DXPU_REQUIRE_SHARED"

// ErrNotFound is returned (wrapped) by Root when no ../shared directory
// sits beside the module root.
var ErrNotFound = errors.New("shared directory not found")

// Required reports whether missing shared files must fail tests instead of
// skipping them.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// modulePath is dxpu's module path, derived from this package's import path
// so that a renamed fork still finds its own go.mod.
var modulePath = strings.TrimSuffix(reflect.TypeOf(marker{}).PkgPath(), "/internal/shareddata")

type marker struct{}

// Root returns the absolute path of the shared directory: ../shared beside
// the module root. It looks for the module root first upwards from the
// working directory, then from this source file's location as compiled in
// (which lets a binary run from elsewhere on the machine that built it).
// The error wraps ErrNotFound and names the places searched.
func Root() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		wd = ""
	}
	_, src, _, _ := runtime.Caller(0)
	return find(wd, src)
}

// ModuleRoot returns the absolute path of dxpu's module root (the
// repository checkout), found as Root finds it: upwards from the working
// directory, then from this source file's compiled-in location. Products
// use it for the files committed with the repository (testdata/traces);
// the error names the places searched.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		wd = ""
	}
	_, src, _, _ := runtime.Caller(0)
	return findModule(wd, src)
}

// findModule does ModuleRoot's work from a start directory and a source
// file path, either of which may be empty.
func findModule(start, src string) (string, error) {
	var tried []string
	if start != "" {
		if mod, ok := moduleRootAbove(start); ok {
			return mod, nil
		}
		tried = append(tried, "above "+start)
	}
	if src != "" && filepath.IsAbs(src) {
		mod := filepath.Dir(filepath.Dir(filepath.Dir(src)))
		if isModuleRoot(mod) {
			return mod, nil
		}
		tried = append(tried, mod)
	}
	if len(tried) == 0 {
		return "", fmt.Errorf("shareddata: no %s go.mod: no working directory and no source location", modulePath)
	}
	return "", fmt.Errorf("shareddata: no %s go.mod (looked %s)", modulePath, strings.Join(tried, ", "))
}

// find does Root's work from a start directory and a source file path,
// either of which may be empty.
func find(start, src string) (string, error) {
	var tried []string
	if start != "" {
		if mod, ok := moduleRootAbove(start); ok {
			if p, ok := sharedBeside(mod); ok {
				return p, nil
			}
			tried = append(tried, filepath.Join(mod, "..", "shared"))
		} else {
			tried = append(tried, "no "+modulePath+" go.mod above "+start)
		}
	}
	// With -trimpath the source path is relative to the module: useless.
	if src != "" && filepath.IsAbs(src) {
		// src is <module root>/internal/shareddata/root.go.
		mod := filepath.Dir(filepath.Dir(filepath.Dir(src)))
		if isModuleRoot(mod) {
			if p, ok := sharedBeside(mod); ok {
				return p, nil
			}
			if p := filepath.Join(mod, "..", "shared"); !slices.Contains(tried, p) {
				tried = append(tried, p)
			}
		}
	}
	if len(tried) == 0 {
		return "", fmt.Errorf("shareddata: %w: no working directory and no source location", ErrNotFound)
	}
	return "", fmt.Errorf("shareddata: %w (tried %s)", ErrNotFound, strings.Join(tried, ", "))
}

// moduleRootAbove returns the nearest directory at or above dir holding
// dxpu's go.mod; other modules' go.mod files are passed over.
func moduleRootAbove(dir string) (string, bool) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	for {
		if isModuleRoot(dir) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// isModuleRoot reports whether dir holds a go.mod declaring modulePath.
func isModuleRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			if i := strings.Index(rest, "//"); i >= 0 {
				rest = rest[:i]
			}
			return strings.Trim(strings.TrimSpace(rest), `"`+"`") == modulePath
		}
	}
	return false
}

// sharedBeside returns mod/../shared, cleaned, when it is a directory.
func sharedBeside(mod string) (string, bool) {
	p := filepath.Join(filepath.Dir(mod), "shared")
	st, err := os.Stat(p)
	return p, err == nil && st.IsDir()
}
