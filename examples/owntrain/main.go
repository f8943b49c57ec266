// Command owntrain is the train command with a model and a dataset of its
// own: it registers them, then hands the command line to traincmd.Main, so
// that every flag of train works for them — the launcher (--pes), mpirun,
// checkpoints and restarts, the recipe, the reports:
//
//	go run ./examples/owntrain --pes 2 --model resmlp --dataset rings --model-opt blocks=2
//
// The PEs the launcher starts are this program again, so what main
// registered before calling traincmd.Main is known in every PE.
package main

import (
	"os"

	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/traincmd"
)

func main() {
	register()
	traincmd.Program = "owntrain" // its messages name this program: "Run 'owntrain --help' for the flags."
	os.Exit(traincmd.Main())
}

// register makes the model and the dataset known to --model and --dataset.
func register() {
	models.Register("resmlp", newResMLP)
	datasets.Register("rings", loadRings)
}
