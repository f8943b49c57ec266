package optim_test

import (
	"fmt"
	"slices"

	"github.com/symddp/symddp/optim"
)

// Adam minimising f(p) = (p − 3)² from p = 0: the gradient is 2(p − 3).
// Early steps move p by about lr each, whatever the gradient's size.
func ExampleNewAdam() {
	o, err := optim.NewAdam(optim.DefaultAdamConfig())
	if err != nil {
		panic(err)
	}
	p := []float32{0}
	state := [][]float32{make([]float32, 1), make([]float32, 1)} // exp_avg, exp_avg_sq
	for step := 1; step <= 300; step++ {
		o.Update(p, []float32{2 * (p[0] - 3)}, state, step, 0.1)
		if step == 1 || step == 2 || step == 300 {
			fmt.Printf("step %3d: p = %.3f\n", step, p[0])
		}
	}
	// Output:
	// step   1: p = 0.100
	// step   2: p = 0.200
	// step 300: p = 3.000
}

// An optimizer is one fused loop over the flat arenas and is elementwise:
// updating the arena bucket by bucket gives the same bits as one call, so
// a trainer may update each bucket as soon as its allreduce completes.
func ExampleOptimizer_buckets() {
	o, err := optim.New("adamw", optim.Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
	if err != nil {
		panic(err)
	}
	const n = 10
	whole, parts := make([]float32, n), make([]float32, n)
	grads := make([]float32, n)
	for i := range n {
		whole[i], grads[i] = float32(i)/n, float32(n-2*i)/n
	}
	copy(parts, whole)
	newState := func() [][]float32 { return [][]float32{make([]float32, n), make([]float32, n)} }
	sw, sp := newState(), newState()
	for step := 1; step <= 5; step++ {
		o.Update(whole, grads, sw, step, 1e-2)
		for _, b := range [][2]int{{0, 3}, {3, 8}, {8, n}} { // three buckets
			lo, hi := b[0], b[1]
			o.Update(parts[lo:hi], grads[lo:hi], [][]float32{sp[0][lo:hi], sp[1][lo:hi]}, step, 1e-2)
		}
	}
	fmt.Println("same bits:", slices.Equal(whole, parts), slices.Equal(sw[0], sp[0]), slices.Equal(sw[1], sp[1]))
	// Output:
	// same bits: true true true
}

// The per-step constants a device kernel takes, computed once on the host
// in float64 from the float32 hyperparameters and rounded to float32: Adam's
// bias corrections at steps 1 and 2. (β2 is the float32 nearest 0.999,
// hence 0.0316226 rather than √0.001 = 0.0316228.)
func ExampleHyper_StepScalars() {
	o, err := optim.NewAdam(optim.DefaultAdamConfig())
	if err != nil {
		panic(err)
	}
	h := o.Hyper()
	for step := 1; step <= 2; step++ {
		s := h.StepScalars(step, 1e-3)
		fmt.Printf("step %d: lr %g, step size %.6g, sqrt(1-β2^t) %.6g, decay %g\n", step, s.LR, s.StepSize, s.BC2Sqrt, s.Decay)
	}
	// Output:
	// step 1: lr 0.001, step size 0.01, sqrt(1-β2^t) 0.0316226, decay 1
	// step 2: lr 0.001, step size 0.00526316, sqrt(1-β2^t) 0.0447099, decay 1
}

// Schedules compose: a linear warmup of 3 steps in front of a step decay
// that halves the rate every 2 steps. After the warmup the decay counts its
// own steps from 1.
func ExampleNewWarmup() {
	decay, err := optim.NewStepDecay(0.1, 2, 0.5)
	if err != nil {
		panic(err)
	}
	s, err := optim.NewWarmup(3, decay)
	if err != nil {
		panic(err)
	}
	for step := 1; step <= 8; step++ {
		fmt.Printf("%.4f ", s.LR(step))
	}
	fmt.Println()
	// Output:
	// 0.0333 0.0667 0.1000 0.1000 0.1000 0.0500 0.0500 0.0250
}
