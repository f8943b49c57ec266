//go:build !cgo

package cudalib

// GPT stands in for the GPT kernels in builds without cgo, where OpenGPT
// always fails and no method is ever called. The stand-ins of its methods
// are generated (nocgo_gen.go).
type GPT struct{}

// OpenGPT always fails without cgo.
func OpenGPT(l *Lib) (*GPT, error) { return nil, errNoCgo }
