package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
)

// The tests of this package start the test binary itself as PEs (and as a
// launcher) with LAUNCH_TEST_ROLE set; TestMain then plays that role instead
// of running the tests.
const (
	envRole   = "LAUNCH_TEST_ROLE"
	envPidDir = "LAUNCH_TEST_PIDDIR"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(playRole(role))
	}
	os.Exit(m.Run())
}

func playRole(role string) int {
	cfg, backend, isPE, err := comm.ConfigFromEnv()
	if role != "launcher" && (err != nil || !isPE) {
		fmt.Fprintf(os.Stderr, "role %s: not a PE: %v\n", role, err)
		return 99
	}
	if dir := os.Getenv(envPidDir); dir != "" && isPE {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("pe-%d", cfg.PE)), []byte(strconv.Itoa(os.Getpid())), 0o600)
	}
	switch role {
	case "env": // report what the PE was told
		fmt.Printf("pe=%d npes=%d backend=%s heap=%s size=%d timeout=%v rundir=%s\n",
			cfg.PE, cfg.NPEs, backend, cfg.HeapName, cfg.HeapSize, cfg.Timeout, cfg.RunDir)
		_, heapErr := os.Stat(cfg.HeapName)
		fi, dirErr := os.Stat(cfg.RunDir)
		fmt.Fprintf(os.Stderr, "heap exists: %v, run dir is a dir: %v\n", heapErr == nil, dirErr == nil && fi.IsDir())
		fmt.Fprint(os.Stderr, "no newline at the end")
		return 0
	case "fail-on-1": // PE 1 fails after 30 lines of stderr; the others wait
		if cfg.PE == 1 {
			for i := 1; i <= 30; i++ {
				fmt.Fprintf(os.Stderr, "line %d\n", i)
			}
			return 3
		}
		time.Sleep(time.Minute)
		fmt.Printf("pe=%d outlived the failed PE\n", cfg.PE)
		return 0
	case "sleep":
		time.Sleep(time.Minute)
		return 0
	case "trap": // exit cleanly on the first SIGINT or SIGTERM
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		if dir := os.Getenv(envPidDir); dir != "" {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("ready-%d", cfg.PE)), nil, 0o600)
		}
		select {
		case s := <-ch:
			fmt.Printf("PE %d got %v\n", cfg.PE, s)
			return 0
		case <-time.After(time.Minute):
			return 1
		}
	case "trap-fail-on-1": // PE 1 fails once PE 0 traps SIGTERM, which says whose it is
		trapped := filepath.Join(cfg.RunDir, "trapped-0")
		if cfg.PE == 1 {
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(trapped); err == nil {
					break
				}
			}
			return 3
		}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		os.WriteFile(trapped, nil, 0o600)
		select {
		case s := <-ch:
			fmt.Printf("PE %d got %v, stopped by the launcher: %v\n", cfg.PE, s, Process{Role: LocalPE, Config: cfg}.StoppedByLauncher())
			return 0
		case <-time.After(time.Minute):
			return 1
		}
	case "mps": // report the MPS variables
		daemon, _ := os.ReadFile(filepath.Join(os.Getenv("CUDA_MPS_PIPE_DIRECTORY"), "daemon.pid"))
		fmt.Printf("pe=%d daemon=%s pipe=%s share=%s\n", cfg.PE, strings.TrimSpace(string(daemon)),
			os.Getenv("CUDA_MPS_PIPE_DIRECTORY"), os.Getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"))
		return 0
	case "launcher": // a launcher of LAUNCH_TEST_PE_ROLE PEs, in its own process
		s := Spec{
			Path: os.Args[0], Args: []string{}, NPEs: 2, ForwardSignals: true,
			Env: []string{envRole + "=" + os.Getenv("LAUNCH_TEST_PE_ROLE")},
		}
		if os.Getenv("LAUNCH_TEST_MPS") != "" {
			s.MPS = &MPS{PEsPerGPU: 2}
		}
		err := Run(context.Background(), s)
		fmt.Fprintf(os.Stderr, "launcher: %v\n", err)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, ErrInterrupted):
			return 130
		}
		return 1
	}
	return 98
}
