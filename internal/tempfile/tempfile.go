// Package tempfile creates the temporary files that outputs are written
// to before they are renamed into place (checkpoints, exports, shards),
// with the mode a plain os.Create gives (0666 less the umask), so the file
// in place can be read by whoever may read the user's other files: a
// file of os.CreateTemp keeps its mode 0600 through the rename.
package tempfile

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Create creates a new file in dir (os.TempDir() when ""), opened for
// reading and writing, named by pattern with its last "*" replaced by a
// random string (appended when there is none), as os.CreateTemp names it,
// but with mode 0666 less the umask instead of 0600. The caller removes
// or renames it.
func Create(dir, pattern string) (*os.File, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	if strings.ContainsRune(pattern, os.PathSeparator) {
		return nil, &os.PathError{Op: "createtemp", Path: pattern, Err: errors.New("pattern contains path separator")}
	}
	prefix, suffix := pattern, ""
	if i := strings.LastIndexByte(pattern, '*'); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, os.ErrExist) && try < 10000 {
			continue
		}
		return f, err
	}
}
