package ddp_test

import (
	"context"
	"fmt"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// Train an MLP on a synthetic problem on one PE in this process. The same
// code runs unchanged on every PE of a job that Launch, `train` or mpirun
// started: only the Comm differs.
func Example() {
	c, err := comm.Open("shm", comm.Config{NPEs: 1}) // one PE: no launcher needed
	if err != nil {
		panic(err)
	}
	defer c.Close()
	e, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		panic(err)
	}
	train, test, err := datasets.SyntheticSplit(2048, 512, 32, 10, 1)
	if err != nil {
		panic(err)
	}
	m, err := models.New("mlp", models.Config{Input: train.SampleShape(), Classes: train.Classes(), Hidden: []int{64}})
	if err != nil {
		panic(err)
	}
	o, err := optim.New("sgd", optim.Config{Momentum: 0.9})
	if err != nil {
		panic(err)
	}
	var losses []float64
	t, err := ddp.New(c, e, m, o, ddp.Options{
		GlobalBatch: 64,
		Epochs:      2,
		LR:          0.05,
		LogEvery:    16,
		Hooks: ddp.Hooks{
			OnStart: func(s ddp.StartInfo) {
				fmt.Printf("%d parameters, %d steps of %d rows on %d PE\n", s.Params, s.TotalSteps, s.MicroBatch, s.NPEs)
			},
			OnLog:      func(l ddp.LogInfo) { losses = append(losses, l.Loss) },
			OnEpochEnd: func(ep ddp.EpochInfo) { fmt.Printf("epoch %d done at step %d\n", ep.Epoch, ep.Step) },
		},
	})
	if err != nil {
		panic(err)
	}
	defer t.Close()
	res, err := t.Fit(context.Background(), train, test)
	if err != nil {
		panic(err)
	}
	fmt.Println("logged", len(losses), "times; loss fell:", losses[len(losses)-1] < losses[0]/2)
	fmt.Println("test accuracy above 90%:", res.Test.Accuracy > 0.9, "on", res.Test.Samples, "samples")
	fmt.Println("replicas identical:", res.Replicas.Identical)
	// Output:
	// 2762 parameters, 64 steps of 64 rows on 1 PE
	// epoch 0 done at step 32
	// epoch 1 done at step 64
	// logged 4 times; loss fell: true
	// test accuracy above 90%: true on 512 samples
	// replicas identical: true
}
