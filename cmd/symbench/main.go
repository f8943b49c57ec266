// Command symbench measures symddp's runtime. It has one subcommand per
// benchmark:
//
//	symbench allreduce [flags]   allreduce bus bandwidth of the shm backend,
//	                             beside Open MPI's MPI_Allreduce on the same host
//	symbench train [flags]       samples/s of the train command at --pes 1, 2, 4, 8,
//	                             the speed-up, allreduce overlap and memory per PE
//	symbench gpt-cpu [flags]     tokens/s of train --model gpt-tiny (--model llama-tiny)
//	                             at --pes 1, 2, 4 beside PyTorch DDP in the same run,
//	                             memory per PE
//	symbench gpu-gpt [flags]     tokens/s and MFU of train --backend nvshmem --model gpt2
//	                             (and two byte models) beside PyTorch eager and torch.compile
//	symbench all [flags]         allreduce and train, and on a GPU host gpu-train and
//	                             (2+ GPUs) gpu-allreduce: a markdown report and a PNG
//	                             plot in an output directory
//
// Run `symbench <subcommand> -h` for a subcommand's flags. A subcommand that
// needs several PEs starts them itself (comm/launch): the PEs are this binary
// again, run with the same arguments and the PE environment.
package main

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/spf13/pflag"
)

// errNoMPI is what allreduce-mpi says in a build without the mpi tag
// (allreduce_mpi_stub.go); a build with it never returns it.
var errNoMPI = errors.New("this symbench has no MPI backend: rebuild it with `go build -tags mpi ./cmd/symbench` (needs libopenmpi-dev)")

// subcommand is one benchmark.
type subcommand struct {
	summary string
	run     func(args []string) error
}

// subcommands maps names to benchmarks; register adds them.
var subcommands = map[string]subcommand{}

// register adds a subcommand. Its run returns what its flags' parsing
// returns, pflag.ErrHelp included: -h (which printed the usage) is a
// success for every subcommand here, in one place.
func register(name, summary string, run func(args []string) error) {
	subcommands[name] = subcommand{summary, func(args []string) error {
		if err := run(args); !errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return nil
	}}
}

func init() {
	register("allreduce", "allreduce bus bandwidth of shm, beside Open MPI's MPI_Allreduce", runAllReduce)
	register("train", "samples/s, speed-up, allreduce overlap and memory per PE of train at --pes 1, 2, 4, 8", runCPUTrain)
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	sub, ok := subcommands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "symbench: unknown subcommand %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err := sub.run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "symbench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: symbench <subcommand> [flags]\n\nsubcommands:\n")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-*s  %s\n", width, n, subcommands[n].summary)
	}
}
