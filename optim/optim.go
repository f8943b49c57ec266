// Package optim holds symddp's optimizers, learning-rate schedules and
// gradient clipping. Each optimizer is one fused loop over the flat parameter,
// gradient and state slices of the arenas: every PE runs the same update on
// the same reduced gradients, so replicas stay bitwise identical.
package optim

// Hyper is an optimizer's hyperparameters, in a form device engines can
// run their own fused kernels from.
type Hyper struct {
	// Kind is "sgd", "adam" or "adamw".
	Kind string
	// Momentum and Nesterov apply to SGD.
	Momentum float32
	Nesterov bool
	// WeightDecay is L2 added to the gradient (SGD, Adam) or decoupled
	// decay (AdamW).
	WeightDecay float32
	// Beta1, Beta2 and Eps apply to Adam and AdamW.
	Beta1, Beta2, Eps float32
}

// Optimizer updates parameters in place from their gradients.
type Optimizer interface {
	// Name is the registry name ("sgd", "adam", "adamw").
	Name() string
	// Slots is the number of state vectors, each as long as the parameters
	// (0 for plain SGD, 1 with momentum, 2 for Adam).
	Slots() int
	// Update applies step number step (1, 2, ...) with learning rate lr to
	// params from grads; state holds Slots() slices of len(params). It is
	// one pass over the slices and does not allocate.
	Update(params, grads []float32, state [][]float32, step int, lr float32)
	// Hyper returns the hyperparameters for device engines.
	Hyper() Hyper
}

// Schedule gives the learning rate of a step (steps count from 1).
type Schedule interface {
	LR(step int) float32
}
