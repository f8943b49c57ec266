//go:build !cgo

package cudalib

import "fmt"

// Lib stands in for the loaded library in builds without cgo, where Load
// always fails and no method is ever called on a Lib. The stand-ins of its
// methods are generated (nocgo_gen.go).
type Lib struct{}

// SymBuf stands in for a symmetric allocation in builds without cgo.
type SymBuf struct{}

// errNoCgo is what every entry point returns without cgo.
var errNoCgo = fmt.Errorf("%w: this program was built without cgo (CGO_ENABLED=0)", ErrUnavailable)

// Load always fails without cgo: the library can only be reached through cgo.
func Load(explicit string) (*Lib, error) { return nil, errNoCgo }

// Buildable reports whether this build can load the library at all: false
// without cgo.
func Buildable() bool { return false }
