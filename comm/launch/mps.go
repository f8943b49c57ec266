package launch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MPS asks Run to give the job a private CUDA MPS control daemon, so that
// several PEs on one GPU run their kernels at once instead of time-slicing.
// The daemon's pipe and log directories live in the job's run directory;
// Run stops the daemon however the job ends, and a later Run stops the
// daemon of a launcher that was killed with SIGKILL before removing its run
// directory.
type MPS struct {
	// PEsPerGPU is the largest number of PEs that share one GPU; each PE
	// gets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = 100 / PEsPerGPU so that the
	// shares of a GPU sum to at most 100.
	PEsPerGPU int
	// Control is the nvidia-cuda-mps-control binary ("" finds it on PATH).
	Control string
}

// MPS directories inside a run directory.
const (
	mpsPipeDir = "mps-pipe"
	mpsLogDir  = "mps-log"
)

// ErrNoMPS is wrapped when the MPS control binary cannot be found.
var ErrNoMPS = errors.New("launch: CUDA MPS is not available (nvidia-cuda-mps-control not found)")

// MPSControl returns the path of nvidia-cuda-mps-control, or an error
// wrapping ErrNoMPS.
func MPSControl() (string, error) {
	p, err := exec.LookPath("nvidia-cuda-mps-control")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoMPS, err)
	}
	return p, nil
}

// mpsDaemon is a job's daemon.
type mpsDaemon struct {
	control    string // the nvidia-cuda-mps-control binary
	pipe, logs string // its pipe and log directories
}

// mpsDaemonIn is the daemon of the job whose run directory is runDir, with
// no control binary yet.
func mpsDaemonIn(runDir string) *mpsDaemon {
	return &mpsDaemon{pipe: filepath.Join(runDir, mpsPipeDir), logs: filepath.Join(runDir, mpsLogDir)}
}

// env is the MPS variables every PE and the control client need.
func (d *mpsDaemon) env() []string {
	return []string{"CUDA_MPS_PIPE_DIRECTORY=" + d.pipe, "CUDA_MPS_LOG_DIRECTORY=" + d.logs}
}

// running reports whether the daemon's control pipe exists.
func (d *mpsDaemon) running() bool {
	_, err := os.Stat(filepath.Join(d.pipe, "control"))
	return err == nil
}

// startMPS starts a private daemon for the job whose run directory is
// runDir and returns it with the variables the PEs need.
func startMPS(m MPS, runDir string) (*mpsDaemon, []string, error) {
	d := mpsDaemonIn(runDir)
	d.control = m.Control
	if d.control == "" {
		var err error
		if d.control, err = MPSControl(); err != nil {
			return nil, nil, err
		}
	}
	for _, dir := range []string{d.pipe, d.logs} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, fmt.Errorf("launch: MPS directory: %w", err)
		}
	}
	cmd := exec.Command(d.control, "-d")
	cmd.Env = append(os.Environ(), d.env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("launch: start the MPS daemon (%s -d): %v: %s", d.control, err, bytes.TrimSpace(out))
	}
	if err := d.waitReady(5 * time.Second); err != nil {
		d.stop()
		return nil, nil, err
	}
	share := 100 / max(1, m.PEsPerGPU)
	env := append(d.env(), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="+strconv.Itoa(max(1, share)))
	return d, env, nil
}

// waitReady waits until the daemon's control pipe exists.
func (d *mpsDaemon) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if d.running() {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("launch: the MPS daemon did not open its control pipe in %s within %v", d.pipe, limit)
}

// stop asks the daemon to quit and waits for its control pipe to go.
func (d *mpsDaemon) stop() error {
	cmd := exec.Command(d.control)
	cmd.Env = append(os.Environ(), d.env()...)
	cmd.Stdin = strings.NewReader("quit\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("launch: stop the MPS daemon: %v: %s", err, bytes.TrimSpace(out))
	}
	for i := 0; i < 100; i++ { // the daemon removes its pipe as it exits
		if !d.running() {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("launch: the MPS daemon of %s did not quit", d.pipe)
}

// stopStaleMPS stops the daemon a killed launcher left in runDir, if any,
// and reports whether runDir may go: not while a daemon runs that this
// process cannot stop (its nvidia-cuda-mps-control is not on this PATH, or
// the daemon did not quit). Removing the directory would remove the only
// way to find that daemon, its control pipe; kept, the next launcher that
// can stop it does.
func stopStaleMPS(runDir string) bool {
	d := mpsDaemonIn(runDir)
	if !d.running() {
		return true
	}
	var err error
	if d.control, err = MPSControl(); err != nil {
		return false
	}
	return d.stop() == nil
}
