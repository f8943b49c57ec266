package models_test

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/blas"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/models"
)

// Build the registered mlp, lay its parameters out in two flat arenas,
// initialise them and run one training step's forward and backward.
func ExampleMLP() {
	m, err := models.MLP(models.Config{Input: []int{784}, Hidden: []int{128, 64}, Classes: 10})
	if err != nil {
		panic(err)
	}
	specs := m.Params()
	offsets, total := models.Layout(specs)
	for i, p := range specs {
		fmt.Printf("%-10s %-9s at %d\n", p.Name, fmt.Sprint(p.Shape), offsets[i])
	}
	fmt.Println("parameters:", total)

	params, grads := models.InitArena(specs, 1), make([]float32, total)
	e, err := cpu.New(cpu.Options{BLAS: blas.Gonum, Threads: 1})
	if err != nil {
		panic(err)
	}
	var pv, gv []compute.Tensor
	for i, p := range specs {
		pv = append(pv, e.View(compute.HostArena(params), offsets[i], p.Shape...))
		gv = append(gv, e.View(compute.HostArena(grads), offsets[i], p.Shape...))
	}
	const batch = 32
	if err := m.Build(e, pv, gv, batch); err != nil {
		panic(err)
	}
	x, labels := e.Alloc(batch, 784), e.AllocLabels(batch)
	loss := models.NewCrossEntropy(e, batch, m.Classes())
	logits := m.Forward(x)
	m.Backward(loss.Apply(logits, labels, 1.0/batch), nil)
	_, _, labelled := loss.Totals()
	fmt.Println("logits:", logits.Shape(), "labelled rows:", labelled)
	// Output:
	// fc1.weight [128 784] at 0
	// fc1.bias   [128]     at 100352
	// fc2.weight [64 128]  at 100480
	// fc2.bias   [64]      at 108672
	// fc3.weight [10 64]   at 108736
	// fc3.bias   [10]      at 109376
	// parameters: 109386
	// logits: (32, 10) labelled rows: 32
}
