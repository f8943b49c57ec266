package launch

import (
	"github.com/symddp/symddp/comm"

	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Names of what a job leaves in the file system while it runs: the heap file
// in comm.HeapDir() and the run directory in os.TempDir(), both named after
// the launcher's pid so that a later launcher can tell that they are stale.
const (
	heapPrefix   = "symddp-"
	runDirPrefix = "symddp-run-"
)

// createHeap creates the empty heap file symddp-<pid>-<random> in dir and
// returns its path. The PEs size and map it (comm/shm).
func createHeap(dir string) (string, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("launch: heap name: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%s%d-%s", heapPrefix, os.Getpid(), hex.EncodeToString(r[:])))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("launch: create the symmetric heap in %s (set %s to another tmpfs directory): %w", dir, comm.EnvHeapDir, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("launch: create heap: %w", err)
	}
	return path, nil
}

// removeStale removes the entries prefix<pid>-* of dir whose launcher pid is
// no longer running: what a job killed with SIGKILL left behind. before, if
// not nil, is called on each first, and an entry it returns false for is
// kept (for a later launcher that can deal with it). It returns the paths
// it removed.
func removeStale(dir, prefix string, before func(path string) bool) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, prefix+"*-*"))
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), prefix)
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || processExists(pid) {
			continue
		}
		if before != nil && !before(m) {
			continue
		}
		if err := os.RemoveAll(m); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, m)
	}
	return removed, errors.Join(errs...)
}

// processExists reports whether a process with this pid exists (it may
// belong to another user).
func processExists(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
