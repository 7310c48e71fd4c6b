package shareddata

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FindDir returns the directory Root()/elem...; the error wraps ErrNotFound
// when it is absent or not a directory.
func FindDir(elem ...string) (string, error) {
	p, st, err := stat(elem)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("shareddata: %w: %s is not a directory", ErrNotFound, p)
	}
	return p, nil
}

// FindFile returns the regular file Root()/elem...; the error wraps
// ErrNotFound when it is absent or not a regular file.
func FindFile(elem ...string) (string, error) {
	p, st, err := stat(elem)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("shareddata: %w: %s is not a regular file", ErrNotFound, p)
	}
	return p, nil
}

// stat finds Root()/elem... and stats it, following links.
func stat(elem []string) (string, fs.FileInfo, error) {
	root, err := Root()
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", filepath.Join(elem...), err)
	}
	p := filepath.Join(append([]string{root}, elem...)...)
	st, err := os.Stat(p)
	if err != nil {
		return "", nil, fmt.Errorf("shareddata: %w: %w", ErrNotFound, err)
	}
	return p, st, nil
}

// FindFiles returns, in lexical order, the regular files under dir
// (searched recursively, following links to files) whose names end in one
// of exts (".pcap", ".json.gz"; all files when exts is empty). Finding none,
// or dir being unreadable, is an error wrapping ErrNotFound.
func FindFiles(dir string, exts ...string) ([]string, error) {
	if dir == "" {
		return nil, fmt.Errorf("shareddata: %w: no shared directory", ErrNotFound)
	}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !hasSuffix(d.Name(), exts) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// Follow links to files; pass over links to directories.
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("shareddata: %w: reading shared files: %w", ErrNotFound, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("shareddata: %w: no %s files under %s", ErrNotFound, strings.Join(exts, "/"), dir)
	}
	return files, nil
}

func hasSuffix(name string, exts []string) bool {
	if len(exts) == 0 {
		return true
	}
	for _, e := range exts {
		if strings.HasSuffix(name, e) {
			return true
		}
	}
	return false
}
