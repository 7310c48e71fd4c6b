package bridged

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	raw := bytes.Repeat([]byte{0xab}, 32)
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	for name, tc := range map[string]struct {
		path string
		want []byte
		err  string
	}{
		"raw":     {write("raw", raw, 0o600), raw, ""},
		"hex":     {write("hex", []byte(strings.Repeat("ab", 32)+"\n"), 0o400), raw, ""},
		"loose":   {write("loose", raw, 0o644), nil, "mode 0644"},
		"short":   {write("short", raw[:16], 0o600), nil, "16 bytes, not 32; expected 32 raw bytes, or 64 hex digits"},
		"bad hex": {write("badhex", []byte(strings.Repeat("zz", 32)), 0o600), nil, "not hex: 'z' at offset 0"},
		// 64 characters and a newline: the hex form with a typo, named as
		// such, not "found 65 bytes".
		"hex typo":  {write("typo", []byte(strings.Repeat("ab", 20)+"ag"+strings.Repeat("ab", 11)+"\n"), 0o600), nil, "typo: not hex: 'g' at offset 41; expected 32 raw bytes, or 64 hex digits"},
		"short hex": {write("shorthex", []byte(strings.Repeat("ab", 31)+"\n"), 0o600), nil, "62 characters of text, not 64 hex digits"},
		"empty":     {write("empty", nil, 0o600), nil, "empty is empty: expected 32 raw bytes"},
		"missing":   {filepath.Join(dir, "nope"), nil, "no such file"},
		"directory": {dir, nil, "not a regular file"},
	} {
		k, err := LoadKeyFile(tc.path)
		if tc.err == "" {
			if err != nil || !bytes.Equal(k, tc.want) {
				t.Errorf("%s: %x %v", name, k, err)
			}
			continue
		}
		if !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want ErrKeyFile mentioning %q", name, err, tc.err)
		}
	}
}
