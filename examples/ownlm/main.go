// Command ownlm is the train command with a language model of its own: a
// decoder that is neither GPT nor Llama, composed from the library's public
// layers on models.NewDecoder (model.go), registered as "ownlm" and run
// through traincmd.Main, so that every flag of train works for it — the
// launcher, the language-model recipe, validation, MFU (--peak-tflops on
// the CPU), --recompute block and the sample at the end:
//
//	go run ./examples/ownlm --pes 2 --model ownlm --max-steps 100 --corpus-max 4MiB
//
// The PEs the launcher starts are this program again, so what main
// registered before calling traincmd.Main is known in every PE.
package main

import (
	"os"

	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/traincmd"
)

func main() {
	register()
	traincmd.Program = "ownlm" // its messages name this program: "Run 'ownlm --help' for the flags."
	os.Exit(traincmd.Main())
}

// register makes the model known to --model.
func register() {
	models.Register("ownlm", newOwnLM)
}
