// Package ddp is symddp's data-parallel trainer, and the place to start when
// using symddp as a library.
//
// A job has N processing elements (PEs), one process each, that hold
// identical replicas of a model. A [Trainer] lays the model's parameters and
// gradients out in two flat arenas in the symmetric heap of a comm.Comm,
// broadcasts PE 0's initial parameters, and then runs steps: every PE does
// forward and backward on its own shard of the global batch, the gradient
// arena is summed across PEs bucket by bucket while backward is still
// running, and every PE applies the same optimizer update, so that the
// replicas stay bitwise identical ([Trainer.CheckReplicas] proves it by
// hashing the parameter arena on every PE).
//
// The data flow of one step has no copies between stages:
//
//	batch shard -> model.Forward/Backward (grads written into the grad arena)
//	            -> comm.IAllReduce per bucket as backward finishes it
//	               (sharded update: comm.Sharder's IReduceScatter per bucket;
//	               on the GPU step path, with a bucket size, the bucket's
//	               allreduce or reduce-scatter enqueued on the backend's
//	               collectives stream: overlap.go)
//	            -> optimizer update over the param arena (sharded: over
//	               this PE's shard, then an all-gather)
//
// # A training program
//
// A program brings five things together, each from its own package:
//
//   - a comm.Comm, this PE's handle on the job: [Launch] starts the PEs and
//     gives each its Comm (comm.Open("shm", comm.Config{NPEs: 1}) opens a
//     one-PE job directly);
//   - a compute.Engine, where the arithmetic runs: cpu.New (package
//     compute/cpu) uses OpenBLAS when it is installed, pure Go otherwise;
//   - a models.Model: models.New("mlp", cfg), or a model of your own made of
//     models.Layer values and registered with models.Register;
//   - an optim.Optimizer (optim.New("sgd"|"adam"|"adamw", cfg)) and, if the
//     learning rate should change, an optim.Schedule (optim.NewSchedule; a
//     cosine's Total is Options.Steps(train.Len()), the steps Fit trains);
//   - a training and a test datasets.Dataset: datasets.Load for
//     Fashion-MNIST and MNIST, datasets.SyntheticSplit, datasets.NewInMemory
//     for data already in memory, or any type with the four methods of the
//     interface.
//
// [New] builds the trainer (collectively: every PE calls it the same way)
// and [Trainer.Fit] trains and evaluates:
//
//	func main() {
//		job := ddp.Job{PEs: 4} // run by hand: 4 PE processes of this program
//		err := ddp.Launch(context.Background(), job, func(ctx context.Context, c comm.Comm) error {
//			e, err := cpu.New(cpu.Options{Threads: 1})
//			if err != nil {
//				return err
//			}
//			train, test, err := datasets.Load("fashion-mnist", "")
//			if err != nil {
//				return err
//			}
//			m, err := models.New("mlp", models.Config{Input: train.SampleShape(), Classes: train.Classes()})
//			if err != nil {
//				return err
//			}
//			o, err := optim.New("adam", optim.Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
//			if err != nil {
//				return err
//			}
//			t, err := ddp.New(c, e, m, o, ddp.Options{GlobalBatch: 256, Epochs: 5, LR: 1e-3,
//				Hooks: ddp.Hooks{OnLog: func(l ddp.LogInfo) {
//					if c.MyPE() == 0 {
//						fmt.Printf("step %d: loss %.4f\n", l.Step, l.Loss)
//					}
//				}}})
//			if err != nil {
//				return err
//			}
//			res, err := t.Fit(ctx, train, test)
//			if err != nil {
//				return err
//			}
//			if c.MyPE() == 0 {
//				fmt.Println(res.Test.Accuracy, res.Replicas)
//			}
//			return t.Close()
//		})
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(launch.ExitCode(err))
//		}
//	}
//
// The same binary runs under mpirun, where every process is a PE (build it
// with -tags mpi for the mpi backend). The repository's examples/convnet (a
// convolutional network with its own layers) and examples/customdata (a
// dataset of its own) are complete programs of this shape.
//
// # Options, hooks and results
//
// [Options] sets the global batch (summed over PEs and micro-batches, so a
// run means the same whatever the PE count), the length of the run
// (Epochs, MaxSteps), the learning rate (LR or Schedule), gradient clipping,
// gradient accumulation, the allreduce bucket size, and how often to log,
// evaluate and check the replicas. [Hooks] are called on every PE from the
// training goroutine: OnStart, OnStep, OnLog (with loss and accuracy already
// reduced over PEs), OnEpochEnd, OnCheckpoint and OnWarning; a program
// usually prints from PE 0 only. Fit returns a [Result]: steps, throughput,
// test [Metrics], the last training window and the [ReplicaReport].
//
// # Checkpoints
//
// With [CheckpointOptions].Dir set, Fit writes checkpoints every so many
// steps and at the end: one safetensors file holding the parameters under
// their names, the optimizer state and the position in the data, written by
// PE 0 atomically between two barriers and verified by a SHA-256 when read.
// Resume: "latest" continues exactly where the last run stopped, even with
// another PE count. Cancelling Fit's context (Launch cancels it on SIGINT or
// SIGTERM) stops every PE after the same step and writes a final checkpoint.
//
// # Pretrained weights
//
// Options.InitFrom starts a run from other weights with fresh optimizer
// state, step count and data (fine-tuning): a Hugging Face GPT2LMHeadModel
// (for a GPT) or LlamaForCausalLM (for a Llama) directory, or a symddp
// checkpoint, read by PE 0 ([ReadInitWeights]) and broadcast; a fault is an
// [InitError] on every PE. [ExportHF] writes a GPT or Llama checkpoint in
// Hugging Face's layout (the export command). Both read the architecture
// from a small table each (hfgpt2.go, hfllama.go): names, shapes and
// config.json's fields; the reading, checking and writing are shared
// (hfarch.go).
//
// # Errors
//
// Errors carry the step number. A NaN or Inf loss or gradient stops Fit
// with [ErrNonFinite] unless Options.SkipNonFinite; a checkpoint that cannot
// be used wraps [ErrCorrupt] or [ErrMismatch]. A PE that fails or stalls ends
// the job: its peers' collectives return an error that names it (a dead
// peer at once, a stalled one when the deadline of comm.Config.Timeout
// passes), and the launcher reports the PE and its last lines of output.
package ddp
