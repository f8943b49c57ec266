package optim_test

import (
	"fmt"

	"github.com/symddp/symddp/optim"
)

// SGD with momentum over a two-parameter arena. The caller owns the state:
// one slot as long as the parameters.
func ExampleNewSGD() {
	o, err := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
	if err != nil {
		panic(err)
	}
	params := []float32{1, -1}
	state := [][]float32{make([]float32, len(params))}
	for step := 1; step <= 3; step++ {
		grads := []float32{0.5, -0.5}
		o.Update(params, grads, state, step, 0.1)
		fmt.Printf("step %d: params %.4f, %s %.4f\n", step, params, o.StateNames()[0], state[0])
	}
	// Output:
	// step 1: params [0.9500 -0.9500], momentum [0.5000 -0.5000]
	// step 2: params [0.8550 -0.8550], momentum [0.9500 -0.9500]
	// step 3: params [0.7195 -0.7195], momentum [1.3550 -1.3550]
}

// AdamW with PyTorch's defaults: each step first decays the parameter by
// 1 − lr·wd, then moves it by about lr against the gradient's sign.
func ExampleNewAdamW() {
	o, err := optim.NewAdamW(optim.DefaultAdamWConfig())
	if err != nil {
		panic(err)
	}
	params := []float32{1}
	state := [][]float32{make([]float32, 1), make([]float32, 1)}
	for step := 1; step <= 3; step++ {
		o.Update(params, []float32{2}, state, step, 0.01)
		fmt.Printf("step %d: param %.6f\n", step, params[0])
	}
	// Output:
	// step 1: param 0.989900
	// step 2: param 0.979801
	// step 3: param 0.969703
}

// The registry builds an optimizer from a name and a flat configuration, as
// the command line does; StateNames name the slots in checkpoints.
func ExampleNew() {
	fmt.Println(optim.Names())
	c, _ := optim.DefaultConfig("adam")
	c.WeightDecay = 1e-4 // as if set by --weight-decay
	o, err := optim.New("adam", c)
	if err != nil {
		panic(err)
	}
	fmt.Println(o.Name(), o.Slots(), o.StateNames())
	fmt.Printf("%+v\n", o.Hyper())
	_, err = optim.New("adagrad", c)
	fmt.Println(err)
	// Output:
	// [adam adamw sgd]
	// adam 2 [exp_avg exp_avg_sq]
	// {Kind:adam Config:{Momentum:0 Nesterov:false WeightDecay:0.0001 Beta1:0.9 Beta2:0.999 Eps:1e-08}}
	// optim: unknown optimizer "adagrad" (known: adam, adamw, sgd)
}

// A cosine schedule over 10 steps, the first 2 of them a linear warmup.
func ExampleNewSchedule() {
	s, err := optim.NewSchedule("cosine", optim.ScheduleConfig{LR: 0.1, Warmup: 2, Total: 10, MinLR: 0.001})
	if err != nil {
		panic(err)
	}
	for step := 1; step <= 11; step++ {
		fmt.Printf("%.4f", s.LR(step))
		if step < 11 {
			fmt.Print(" ")
		}
	}
	fmt.Println()
	// Output:
	// 0.0500 0.1000 0.1000 0.0962 0.0855 0.0694 0.0505 0.0316 0.0155 0.0048 0.0010
}

// Clipping the gradient arena to a global norm of 1.
func ExampleClipGlobalNorm() {
	grads := []float32{3, 4}
	norm := optim.ClipGlobalNorm(grads, 1)
	fmt.Printf("norm %g, clipped %.4f, norm now %.4f\n", norm, grads, optim.GlobalNorm(grads))
	// Output:
	// norm 5, clipped [0.6000 0.8000], norm now 1.0000
}
