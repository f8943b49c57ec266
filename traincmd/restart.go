package traincmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/ddp"
)

// exitFinished is a PE's exit status when the run trained to its end but
// could not save its final checkpoint or its metrics: the launcher turns it
// into 1 and does not restart the job (a restart would train again for the
// same failure).
const exitFinished = 65

// finishedError is an error of a run whose results are complete.
type finishedError struct{ err error }

func (f finishedError) Error() string { return f.err.Error() }
func (f finishedError) Unwrap() error { return f.err }

// runWithRestarts runs the job (torchrun's elastic restarts): when a PE
// fails (exits, is killed, misses a deadline), launch.Run stops the others;
// while --max-restarts allows, the failure is printed and every PE is
// started again from the latest intact checkpoint in --checkpoint-dir (from
// the start when there is none yet). Resuming is exact, so the run ends on
// the parameters of a run without the failures. A bad command line, a
// finished run and a signal to the launcher are not restarted.
func runWithRestarts(o *options, spec launch.Spec, stderr io.Writer) error {
	base := spec.Args
	for restarts := 0; ; restarts++ {
		err := launch.Run(context.Background(), spec)
		var pe *launch.PEError
		if err == nil || restarts >= o.maxRestarts || errors.Is(err, launch.ErrInterrupted) ||
			!errors.As(err, &pe) || pe.ExitCode == exitPEUsage || pe.ExitCode == exitPEInput || pe.ExitCode == exitFinished {
			return err
		}
		ckpt, step, cerr := ddp.LatestCheckpoint(o.ckptDir)
		if cerr != nil {
			return fmt.Errorf("%w; no restart: %w", err, cerr)
		}
		fmt.Fprintf(stderr, "%s: %v\n", Program, err)
		from := "from the start (no checkpoint yet)"
		spec.Args = base
		if ckpt != "" {
			from = fmt.Sprintf("from %s (step %d)", ckpt, step)
			// the last --resume on the command line is the one that counts
			// the checkpoint holds the weights now: --init-from started them
			spec.Args = append(withoutFlag(base, "init-from"), "--resume", ckpt)
		}
		fmt.Fprintf(stderr, "%s: restart %d of %d: starting %s again %s\n", Program,
			restarts+1, o.maxRestarts, plural(o.pes, "PE"), from)
	}
}

// withoutFlag is args without --name's occurrences (--name V and --name=V).
func withoutFlag(args []string, name string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--"+name:
			i++ // its value
		case strings.HasPrefix(a, "--"+name+"="):
		default:
			out = append(out, a)
		}
	}
	return out
}
