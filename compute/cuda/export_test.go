package cuda

// PoolMark is where the engine's device pool hands out memory next and how
// many bytes are left in its chunk, for the external tests of the pool.
func PoolMark(e *Engine) (next uintptr, left int) { return e.pool.next, e.pool.left }
