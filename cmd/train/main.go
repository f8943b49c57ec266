// Command train trains a model data-parallel over N processing elements that
// share a symmetric heap.
//
//	train --pes 8 --model mlp              start 8 PEs on this host
//	mpirun -np 16 -H a:8,b:8 train --backend mpi --model mlp
//
// Run `train --help` for the flags. The command itself is package traincmd,
// which a program calls to train its own registered models the same way.
package main

import (
	"os"

	"github.com/symddp/symddp/traincmd"
)

func main() { os.Exit(traincmd.Main()) }
