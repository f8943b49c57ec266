// Package outdir remembers which directories of a command's output path
// do not exist yet, so that a command that creates them and then fails
// before writing into them removes them again, leaving the tree as it
// found it; a directory that existed before is never removed.
package outdir

import (
	"errors"
	"os"
	"path/filepath"
)

// Missing are the directories of an output path that did not exist when
// Of listed them, deepest first: those os.MkdirAll(path) creates.
type Missing []string

// Of lists the directories of path that do not exist now, deepest first
// (none when path exists, or when something other than its absence keeps
// a level from being read: then MkdirAll fails anyway).
func Of(path string) Missing {
	var m Missing
	for p := filepath.Clean(path); ; {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			return m
		}
		m = append(m, p)
		parent := filepath.Dir(p)
		if parent == p {
			return m
		}
		p = parent
	}
}

// RemoveEmpty removes the directories of m, deepest first, as long as
// each is empty: it stops at the first that holds anything, or is gone or
// cannot be removed, so what the command wrote stays with its parents.
func (m Missing) RemoveEmpty() {
	for _, d := range m {
		if os.Remove(d) != nil {
			return
		}
	}
}
