package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/symddp/symddp/comm"
)

// job is a running set of PE processes.
type job struct {
	spec  Spec
	cfg   comm.Config
	procs []*exec.Cmd
	out   outputs
	exits chan exit
}

// exit is a PE process's end.
type exit struct {
	pe    int
	state *os.ProcessState
	err   error
}

func newJob(spec Spec, cfg comm.Config) *job {
	return &job{spec: spec, cfg: cfg, exits: make(chan exit, spec.NPEs)}
}

// start starts every PE. If one cannot start, the ones already started are
// killed and reaped.
func (j *job) start() error {
	n := j.spec.NPEs
	j.out.stderr = make([]*lineWriter, n)
	j.out.stdout = make([]*lineWriter, n)
	for pe := 0; pe < n; pe++ {
		cfg := j.cfg
		cfg.PE = pe
		cmd := exec.Command(j.spec.Path, j.spec.Args...)
		cmd.Args[0] = os.Args[0]
		cmd.Env = environ(j.spec.Env, cfg, j.spec.Backend)
		// Each PE leads its own process group, so a terminal's Ctrl-C reaches
		// the launcher only (which forwards it), and stopping a PE also stops
		// what it started. Pdeathsig kills the PE if the launcher dies.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.WaitDelay = time.Second
		prefix := ""
		if n > 1 {
			prefix = fmt.Sprintf("[pe %d] ", pe)
		}
		j.out.stderr[pe] = newLineWriter(&j.out.mu, j.spec.Stderr, prefix, j.spec.TailLines)
		cmd.Stderr = j.out.stderr[pe]
		if f, ok := j.spec.Stdout.(*os.File); ok && pe == 0 {
			cmd.Stdout = f
		} else {
			j.out.stdout[pe] = newLineWriter(&j.out.mu, j.spec.Stdout, prefix, 0)
			cmd.Stdout = j.out.stdout[pe]
		}
		if err := cmd.Start(); err != nil {
			j.killAll(syscall.SIGKILL)
			for range j.procs {
				<-j.exits
			}
			return fmt.Errorf("launch: start PE %d (%s): %w", pe, j.spec.Path, err)
		}
		j.procs = append(j.procs, cmd)
		go func() {
			err := cmd.Wait()
			j.exits <- exit{pe: pe, state: cmd.ProcessState, err: err}
		}()
	}
	return nil
}

// watch waits for every PE to end, stopping the job on the first failure,
// on ctx's end and on signals.
func (j *job) watch(ctx context.Context) error {
	var sigs chan os.Signal
	if j.spec.ForwardSignals {
		sigs = make(chan os.Signal, 2)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(sigs)
	}
	var (
		failed      []failedPE // in the order they ended
		ctxErr      error
		interrupted os.Signal
		stopping    bool
		kill        <-chan time.Time
		done        = ctx.Done()
		running     = len(j.procs)
		ended       = make([]bool, len(j.procs))
		killed      = make([]bool, len(j.procs)) // by the launcher, with SIGKILL
	)
	stop := func() {
		if !stopping {
			stopping = true
			if j.cfg.RunDir != "" { // the PEs' SIGTERM is ours (StoppedByLauncher)
				_ = os.WriteFile(stoppingPath(j.cfg.RunDir), nil, 0o600)
			}
			j.signalRunning(ended, syscall.SIGTERM)
			kill = time.After(j.spec.Grace)
		}
	}
	killRunning := func() {
		for pe := range killed {
			killed[pe] = killed[pe] || !ended[pe]
		}
		j.signalRunning(ended, syscall.SIGKILL)
	}
	for running > 0 {
		select {
		case ex := <-j.exits:
			running--
			ended[ex.pe] = true
			j.out.stderr[ex.pe].Flush()
			if ex.state == nil || !ex.state.Success() {
				failed = append(failed, failedPE{pe: ex.pe, state: ex.state, tail: j.out.stderr[ex.pe].Tail(),
					byLauncher: killed[ex.pe] || (stopping && stoppedBy(ex.state, syscall.SIGTERM))})
				if interrupted == nil {
					stop()
				}
			}
		case <-done:
			done = nil
			ctxErr = ctx.Err()
			stop()
		case s := <-sigs:
			if interrupted == nil {
				interrupted = s
				j.signalRunning(ended, s.(syscall.Signal))
			} else {
				killRunning()
			}
		case <-kill:
			kill = nil
			killRunning()
		}
	}
	j.out.flush()
	if interrupted != nil { // PEs that stopped as the signal asked did not fail
		sig := interrupted.(syscall.Signal)
		kept := failed[:0]
		for _, f := range failed {
			if !stoppedBy(f.state, sig) {
				kept = append(kept, f)
			}
		}
		failed = kept
	}
	first := j.blame(failed)
	switch {
	case interrupted != nil:
		return &InterruptedError{Signal: interrupted.(syscall.Signal), Failure: first}
	case first != nil:
		return first
	case ctxErr != nil:
		return fmt.Errorf("launch: job stopped: %w", ctxErr)
	}
	return nil
}

// failedPE is a PE that ended with a non-zero status or a signal.
type failedPE struct {
	pe         int
	state      *os.ProcessState
	tail       []string
	byLauncher bool // it was stopping because the launcher told it to
}

// stoppedBy reports whether a PE ended as sig asked: killed by it, or
// exiting with 128 + its number (the shell's convention, which train's PEs
// follow when they catch it).
func stoppedBy(st *os.ProcessState, sig syscall.Signal) bool {
	return st != nil && (st.ExitCode() == 128+int(sig) || endedBySignal(st, sig))
}

func endedBySignal(st *os.ProcessState, sig syscall.Signal) bool {
	if st == nil {
		return false
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// blame picks the failure to report, of the PEs that the launcher did not
// stop: the first that failed of its own accord (crashed, or reported an
// error of its own); else the PEs a deadline waited for, as the first PE
// that gave up on them reported; else the first failure. It returns nil
// when the launcher stopped every PE that failed.
func (j *job) blame(failed []failedPE) *PEError {
	var timedOut *PEError
	var firstErr *PEError
	for _, f := range failed {
		e := newPEError(f.pe, f.state, f.tail)
		rep := readFailure(j.cfg.RunDir, f.pe)
		if rep != nil {
			e.Reason, e.Stderr = rep.Error, nil
			if rep.Origin != nil {
				e.PE = *rep.Origin // the PE whose action failed; every PE says the same
			}
		}
		if f.byLauncher {
			continue
		}
		if firstErr == nil {
			firstErr = e
		}
		switch {
		case rep != nil && len(rep.Missing) > 0:
			if timedOut == nil {
				timedOut = e
				e.Stalled, e.ReportedBy, e.Missing = true, f.pe, rep.Missing
				e.PE = rep.Missing[0]
				if e.PE >= 0 && e.PE < len(j.out.stderr) {
					e.Stderr = j.out.stderr[e.PE].Tail()
				}
			}
		case rep != nil && rep.PeerFailed:
		default:
			return e
		}
	}
	if timedOut != nil {
		return timedOut
	}
	return firstErr
}

// signalRunning sends sig to the process group of every PE that has not
// ended.
func (j *job) signalRunning(ended []bool, sig syscall.Signal) {
	for pe, cmd := range j.procs {
		if !ended[pe] {
			signalGroup(cmd, sig)
		}
	}
}

// killAll sends sig to every started PE's process group.
func (j *job) killAll(sig syscall.Signal) {
	for _, cmd := range j.procs {
		signalGroup(cmd, sig)
	}
}

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	// The PE leads its group; fall back to the PE alone if the group is gone.
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		cmd.Process.Signal(sig)
	}
}
