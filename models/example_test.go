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

// Checkpoint the residual blocks of a network of your own: every block's
// activations come from one scratch pool, so four blocks take the memory
// of one (plus each block's output), and each block's backward runs its
// forward again first. The gradients are those of the same blocks without
// checkpoints, bit for bit.
func ExampleNewCheckpoint() {
	pool := models.NewScratchPool()
	var layers []models.Layer
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("block%d", i)
		layers = append(layers, models.NewCheckpoint(name, pool,
			models.NewResidual(name,
				models.NewLinear(name+".fc", 64, 256, compute.ReLU),
				models.NewLinear(name+".proj", 256, 64, compute.Identity))))
	}
	layers = append(layers, models.NewLinear("head", 64, 10, compute.Identity))
	m := models.NewSequential("deep", []int{64}, 10, layers...)

	specs := m.Params()
	offsets, total := models.Layout(specs)
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
	const batch = 16
	if err := m.Build(e, pv, gv, batch); err != nil {
		panic(err)
	}
	x, labels := e.Alloc(batch, 64), e.AllocLabels(batch)
	loss := models.NewCrossEntropy(e, batch, m.Classes())
	logits := m.Forward(x)
	m.Backward(loss.Apply(logits, labels, 1.0/batch), nil)
	fmt.Println("parameters:", total, "logits:", logits.Shape())
	// Output:
	// parameters: 133002 logits: (16, 10)
}
