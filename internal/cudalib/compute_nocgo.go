//go:build !cgo

package cudalib

// Compute stands in for the compute entry points in builds without cgo,
// where OpenCompute always fails and no method is ever called. The
// stand-ins of its methods and Context's are generated (nocgo_gen.go).
type Compute struct{}

// OpenCompute always fails without cgo.
func OpenCompute(l *Lib) (*Compute, error) { return nil, errNoCgo }

// Context stands in for a compute context in builds without cgo.
type Context struct{}

// Close does nothing without cgo.
func (c *Context) Close() error { return nil }
