package datasets

import (
	"fmt"
	"io/fs"
	"os"
)

// checkRegular returns an error, without the path, when path is a file
// that is not regular: opening a named pipe blocks until something writes
// to it, so a glob or a name that reaches one would hang with no word; a
// directory or a device fails later with an error that does not say why.
// A path it cannot stat is left to the open that follows to report.
func checkRegular(path string) error {
	if info, err := os.Stat(path); err == nil && !info.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", fileKind(info.Mode()))
	}
	return nil
}

// fileKind says in words what a file that is not regular is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}
