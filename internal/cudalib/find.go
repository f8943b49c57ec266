package cudalib

import (
	"os"
	"path/filepath"

	"github.com/symddp/symddp/internal/settings"
)

// Candidates lists where Load looks for the library, in order: explicit
// alone when it is not empty; otherwise $SYMDDP_CUDA_LIB, the executable's
// directory, and build/libsymddp_cuda.so in the working directory and each
// parent up to the module root (the first directory holding go.mod).
func Candidates(explicit string) []string {
	if explicit != "" {
		return []string{explicit}
	}
	var out []string
	if p := settings.Get(EnvLib); p != "" {
		out = append(out, p)
	}
	if exe, err := os.Executable(); err == nil {
		out = append(out, filepath.Join(filepath.Dir(exe), LibName))
	}
	if wd, err := os.Getwd(); err == nil {
		root := ModuleRoot(wd)
		for dir := wd; ; dir = filepath.Dir(dir) {
			out = append(out, filepath.Join(dir, "build", LibName))
			if dir == root || filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return out
}

// ModuleRoot returns the first directory at or above dir (dir itself, its
// parent, ...) that holds a go.mod, or "" when none does.
func ModuleRoot(dir string) string {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}
