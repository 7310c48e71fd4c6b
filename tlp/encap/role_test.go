package encap

import "testing"

func TestParseRole(t *testing.T) {
	t.Parallel()
	for _, r := range []Role{RoleHost, RoleGPU} {
		if got, ok := ParseRole(r.String()); !ok || got != r {
			t.Errorf("ParseRole(%q) = %v %v", r.String(), got, ok)
		}
	}
	for _, s := range []string{"", "Host", "switch", "Role(1)"} {
		if _, ok := ParseRole(s); ok {
			t.Errorf("ParseRole(%q) accepted", s)
		}
	}
}
