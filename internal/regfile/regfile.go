// Package regfile refuses, before it is opened, a path that is not a
// regular file: opening a named pipe blocks until something writes to it,
// so a data file, a checkpoint or a config that names one would hang the
// command without a word; a directory or a device fails later with an
// error that does not say why.
package regfile

import (
	"fmt"
	"io/fs"
	"os"
)

// Check returns an error, without the path, when path is a file that is
// not regular: "not a regular file (a named pipe)". A path it cannot stat
// is left to the open that follows to report.
func Check(path string) error {
	if info, err := os.Stat(path); err == nil && !info.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", Kind(info.Mode()))
	}
	return nil
}

// Kind says in words what a file of mode m that is not regular is.
func Kind(m fs.FileMode) string {
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
