package comm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/symddp/symddp/internal/settings"
)

// Environment variables through which the launcher (comm/launch) tells a
// process that it is a PE, and of which job. See docs/DESIGN.md.
const (
	EnvPE       = settings.PEName   // this PE's number
	EnvNPEs     = settings.NPEs     // the job's size
	EnvBackend  = settings.Backend  // "shm", "nvshmem", "mpi"
	EnvHeap     = settings.Heap     // the symmetric heap's name (shm: a file path)
	EnvHeapSize = settings.HeapSize // each PE's heap size in bytes
	EnvTimeout  = settings.Timeout  // the deadline of every wait, a Go duration
	EnvRunDir   = settings.RunDir   // a directory private to the job
)

// PEVars lists the variables above: those that Config.Environ writes and
// ConfigFromEnv reads. It must not be modified.
var PEVars = []string{EnvPE, EnvNPEs, EnvBackend, EnvHeap, EnvHeapSize, EnvTimeout, EnvRunDir}

// DefaultBackend is the backend a PE opens when SYMDDP_BACKEND is unset.
const DefaultBackend = "shm"

// ConfigFromEnv reads this process's PE configuration from the launcher's
// environment. isPE is false, with a zero Config and a nil error, when
// SYMDDP_PE is unset (the process was not started by the launcher); a
// malformed or inconsistent variable is an error naming it.
func ConfigFromEnv() (cfg Config, backend string, isPE bool, err error) {
	return ConfigFromLookup(settings.Lookup)
}

// ConfigFromLookup is ConfigFromEnv over any variable lookup (os.LookupEnv,
// or a map in tests).
func ConfigFromLookup(lookup func(string) (string, bool)) (cfg Config, backend string, isPE bool, err error) {
	peStr, ok := lookup(EnvPE)
	if !ok {
		return Config{}, "", false, nil
	}
	if cfg.PE, err = envInt(EnvPE, peStr); err != nil {
		return Config{}, "", true, err
	}
	npesStr, ok := lookup(EnvNPEs)
	if !ok {
		return Config{}, "", true, fmt.Errorf("comm: %s is set but %s is not", EnvPE, EnvNPEs)
	}
	if cfg.NPEs, err = envInt(EnvNPEs, npesStr); err != nil {
		return Config{}, "", true, err
	}
	if cfg.NPEs < 1 {
		return Config{}, "", true, fmt.Errorf("comm: %s=%d: a job needs at least one PE", EnvNPEs, cfg.NPEs)
	}
	if err := CheckPE("comm: "+EnvPE, cfg.PE, cfg.NPEs); err != nil {
		return Config{}, "", true, err
	}
	backend = DefaultBackend
	if v, ok := lookup(EnvBackend); ok && v != "" {
		backend = v
	}
	cfg.HeapName, _ = lookup(EnvHeap)
	cfg.RunDir, _ = lookup(EnvRunDir)
	if v, ok := lookup(EnvHeapSize); ok && v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n <= 0 {
			return Config{}, "", true, fmt.Errorf("comm: %s=%q: want a positive number of bytes", EnvHeapSize, v)
		}
		cfg.HeapSize = n
	}
	if v, ok := lookup(EnvTimeout); ok && v != "" {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			return Config{}, "", true, fmt.Errorf("comm: %s=%q: want a positive Go duration such as 90s or 5m", EnvTimeout, v)
		}
		cfg.Timeout = d
	}
	return cfg, backend, true, nil
}

func envInt(name, v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("comm: %s=%q: not an integer", name, v)
	}
	return n, nil
}

// Environ renders cfg and backend as the NAME=value variables that
// ConfigFromEnv reads back. Zero fields are left out, so that the backend's
// defaults apply.
func (cfg Config) Environ(backend string) []string {
	env := []string{
		EnvPE + "=" + strconv.Itoa(cfg.PE),
		EnvNPEs + "=" + strconv.Itoa(cfg.NPEs),
	}
	if backend != "" {
		env = append(env, EnvBackend+"="+backend)
	}
	if cfg.HeapName != "" {
		env = append(env, EnvHeap+"="+cfg.HeapName)
	}
	if cfg.HeapSize > 0 {
		env = append(env, EnvHeapSize+"="+strconv.FormatInt(cfg.HeapSize, 10))
	}
	if cfg.Timeout > 0 {
		env = append(env, EnvTimeout+"="+cfg.Timeout.String())
	}
	if cfg.RunDir != "" {
		env = append(env, EnvRunDir+"="+cfg.RunDir)
	}
	return env
}

// EnvHeapDir overrides the directory of shared-memory heap files.
const EnvHeapDir = settings.HeapDir

// HeapDir is the directory that holds shared-memory heap files: $SYMDDP_HEAP_DIR
// when set, else /dev/shm when it exists, else os.TempDir().
func HeapDir() string {
	if d := settings.Get(EnvHeapDir); d != "" {
		return d
	}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// EnvDesyncCheck turns off the check that every PE calls the same
// collective ("off"); it is on by default. See DesyncChecking.
const EnvDesyncCheck = settings.DesyncCheck

// DesyncChecking reports whether the backends compare the PEs' collective
// calls at every collective's entry (see the package doc, "Desync
// detection"): true unless $SYMDDP_DESYNC_CHECK is off, 0 or false. Any
// other value than those and on, 1, true or empty is an error naming the
// variable. Every PE of a job must agree; the launcher passes the variable
// on to all of them.
func DesyncChecking() (bool, error) {
	return desyncChecking(settings.Get(EnvDesyncCheck))
}

func desyncChecking(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "on", "1", "true":
		return true, nil
	case "off", "0", "false":
		return false, nil
	}
	return false, fmt.Errorf("comm: %s=%q: want on or off", EnvDesyncCheck, v)
}
