//go:build !mpi

package main

import "errors"

func noMPI(err error) bool { return errors.Is(err, errNoMPI) }
