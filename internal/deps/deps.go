//go:build tools

// Package deps pins the modules the design names before every one of them
// is imported by code, so that `go mod tidy` keeps them and their checksums.
package deps

import (
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/pflag"
	_ "github.com/stretchr/testify/require"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/term"
	_ "gonum.org/v1/gonum/blas/gonum"
	_ "gorgonia.org/tensor"
)
