//go:build mpi

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	_ "github.com/symddp/symddp/comm/mpi"

	"github.com/symddp/symddp/internal/settings"
	"github.com/symddp/symddp/internal/units"
)

// The allreduce-mpi subcommand (build tag mpi): the mpi comm backend's
// AllReduce under mpirun, beside the shm backend and Open MPI's own
// MPI_Allreduce (bench/mpi_allreduce.c), timed the same way as `symbench
// allreduce` (allreduce_pe.go).
func init() {
	register("allreduce-mpi", "allreduce of the mpi backend under mpirun, beside shm and MPI_Allreduce (-tags mpi)", runAllReduceMPI)
}

// mpiBenchOpts are the flags of `symbench allreduce-mpi`.
type mpiBenchOpts struct {
	allReduceOpts
	hier bool // also measure the backend's hierarchical mode
}

func parseAllReduceMPIFlags(args []string) (mpiBenchOpts, error) {
	var o mpiBenchOpts
	fs := pflag.NewFlagSet("symbench allreduce-mpi", pflag.ContinueOnError)
	fs.IntSliceVar(&o.pes, "pes", []int{2, 4}, "job sizes (ranks, at least 2) to measure")
	minSize, maxSize := o.sweepFlags(fs, "16MiB")
	fs.StringVar(&o.mpirunArgs, "mpirun-args", "", "extra arguments for mpirun, such as \"--mca btl tcp,self --mca osc pt2pt\"")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "deadline of every wait in the PEs")
	fs.BoolVar(&o.hier, "hierarchical", false, "also measure the mpi backend with "+mpiHierEnv+"=1")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	err := o.check(*minSize, *maxSize)
	return o, err
}

// mpiHierEnv switches the mpi backend's hierarchical allreduce on in the
// PEs (comm/mpi reads it).
const mpiHierEnv = settings.MPIHier

func runAllReduceMPI(args []string) error {
	opts, err := parseAllReduceMPIFlags(args)
	if err != nil {
		return err
	}
	// A PE of the shm job (our launcher) or of the mpi job (mpirun).
	cfg, backend, isPE, err := comm.ConfigFromEnv()
	if err != nil {
		return err
	}
	if isPE {
		return allReducePE(cfg, backend, opts.allReduceOpts)
	}
	if env, ok, err := launch.DetectMPI(); err != nil {
		return err
	} else if ok {
		cfg := comm.Config{PE: env.Rank, NPEs: env.Size, HeapSize: opts.maxBytes + 1<<20, Timeout: opts.timeout}
		return allReducePE(cfg, "mpi", opts.allReduceOpts)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ref, err := newMPIRunner(opts.mpirunArgs)
	if err != nil {
		return err
	}
	defer ref.close()
	variants := []string{"mpi"}
	if opts.hier {
		variants = append(variants, "mpi hier")
	}
	var rows []mpiRow
	for _, n := range opts.pes {
		fmt.Fprintf(os.Stderr, "symbench: shm, %d PEs\n", n)
		shm, err := shmAllReduce(ctx, n, opts.allReduceOpts)
		if err != nil {
			return fmt.Errorf("shm with %d PEs: %w", n, err)
		}
		backends := make([]map[int64]result, len(variants))
		for i, v := range variants {
			fmt.Fprintf(os.Stderr, "symbench: %s backend, %d ranks\n", v, n)
			if backends[i], err = ref.backendAllReduce(ctx, n, opts, v == "mpi hier"); err != nil {
				return fmt.Errorf("%s backend with %d ranks: %w", v, n, err)
			}
		}
		fmt.Fprintf(os.Stderr, "symbench: MPI_Allreduce, %d ranks\n", n)
		raw, err := ref.allReduce(ctx, n, opts.allReduceOpts)
		if err != nil {
			return fmt.Errorf("MPI_Allreduce with %d ranks: %w", n, err)
		}
		for _, size := range opts.sizes() {
			r := mpiRow{npes: n, bytes: size, shm: shm[size].seconds, raw: raw[size].seconds}
			for _, b := range backends {
				r.backend = append(r.backend, b[size].seconds)
			}
			rows = append(rows, r)
		}
	}
	return printMPITable(os.Stdout, opts, describeHost(ref), variants, rows)
}

// backendAllReduce runs this binary under mpirun as n ranks of the mpi
// backend and returns rank 0's results by size.
func (m *mpiRunner) backendAllReduce(ctx context.Context, n int, opts mpiBenchOpts, hier bool) (map[int64]result, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var args []string
	if hier {
		args = append(args, "-x", mpiHierEnv+"=1")
	}
	args = append(args, self, "allreduce-mpi",
		"--min", strconv.FormatInt(opts.minBytes, 10), "--max", strconv.FormatInt(opts.maxBytes, 10),
		"--step", strconv.FormatInt(opts.step, 10), "--reps", strconv.Itoa(opts.reps),
		"--target", opts.target.String(), "--timeout", opts.timeout.String())
	return m.runRanks(ctx, n, len(opts.sizes()), true, args...)
}

// mpiRow is one line of the allreduce-mpi table: seconds per call.
type mpiRow struct {
	npes    int
	bytes   int64
	shm     float64
	backend []float64 // one per variant
	raw     float64
}

func printMPITable(w io.Writer, opts mpiBenchOpts, host string, variants []string, rows []mpiRow) error {
	fmt.Fprintf(w, "allreduce, float32 sum in place; time per call = median of %d repetitions of ~%v, each the slowest PE's\n", opts.reps, opts.target)
	fmt.Fprintf(w, "shm: the shm backend (train --pes N); mpi: the mpi backend under mpirun; MPI_Allreduce: bench/mpi_allreduce.c\n")
	fmt.Fprintf(w, "host: %s\n\n", host)
	head := []string{"N", "size", "shm"}
	for _, v := range variants {
		head = append(head, v)
	}
	head = append(head, "MPI_Allreduce")
	for _, v := range variants {
		head = append(head, v+"/shm")
	}
	lines := [][]string{}
	for _, r := range rows {
		l := []string{fmt.Sprint(r.npes), units.Bytes(r.bytes), formatTime(r.shm)}
		for _, s := range r.backend {
			l = append(l, formatTime(s))
		}
		l = append(l, formatTime(r.raw))
		for _, s := range r.backend {
			l = append(l, fmt.Sprintf("%.2f×", s/r.shm))
		}
		lines = append(lines, l)
	}
	return writeTable(w, opts.format, 3, head, lines)
}
