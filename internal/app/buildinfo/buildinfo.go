// Package buildinfo reads what `dxpu --version` reports from the build
// information the Go toolchain embeds: the module version, the VCS
// revision and time of the tree it was built from, whether that tree had
// uncommitted changes, and the Go version.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Info is the build's identity.
type Info struct {
	Module, Version, Revision, Time, Go string
	Modified                            bool
}

// Read reads the build information (ok false when the binary has
// none, as under some test runners).
func Read() (Info, bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{}, false
	}
	return From(bi), true
}

// From extracts Info from build information.
func From(bi *debug.BuildInfo) Info {
	v := Info{Module: bi.Main.Path, Version: bi.Main.Version, Go: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one line --version prints; fields the build did not
// record say so rather than vanish.
func (v Info) String() string {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	var b strings.Builder
	fmt.Fprintf(&b, "dxpu %s", or(v.Version, "(devel)"))
	rev := or(v.Revision, "unknown (built without VCS stamping)")
	if v.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(&b, " revision %s", rev)
	if v.Time != "" {
		fmt.Fprintf(&b, " committed %s", v.Time)
	}
	fmt.Fprintf(&b, " %s", or(v.Go, "go?"))
	if v.Module != "" {
		fmt.Fprintf(&b, " module %s", v.Module)
	}
	return b.String()
}
