//go:build unix

package ddp_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/symddp/symddp/ddp"
)

// TestCheckpointFileMode: a checkpoint gets os.Create's mode, 0666 less the
// umask, so another user or a container can read it (it was 0600 whatever
// the umask, os.CreateTemp's mode).
func TestCheckpointFileMode(t *testing.T) {
	dir := t.TempDir()
	o := baseOpts()
	o.MaxSteps = 2
	o.Checkpoint = ddp.CheckpointOptions{Dir: dir}
	old := syscall.Umask(0o027)
	_, err := fitLocal(t, 16, o)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "ckpt-000000002.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o640 {
		t.Errorf("checkpoint mode %03o under umask 027, want 640", got)
	}
}
