package cuda

// PoolMark is where the engine's device pool hands out memory next and how
// many bytes are left in its chunk, for the external tests of the pool.
func PoolMark(e *Engine) (next uintptr, left int) { return e.pool.next, e.pool.left }

// SoftmaxCausal and SoftmaxCausalBackward enqueue the attention plans'
// softmax kernels on t's memory, for the tests of their bits.
func SoftmaxCausal(e *Engine, p *Tensor, nmat, t int) error {
	return e.dev.SoftmaxCausal(p.ptr, nmat, t)
}

func SoftmaxCausalBackward(e *Engine, ds, p *Tensor, nmat, t int) error {
	return e.dev.SoftmaxCausalBackward(ds.ptr, p.ptr, nmat, t)
}
