package main

import (
	"errors"
	"log/slog"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/compute"
)

// newGPUEngine builds the CUDA engine on the nvshmem comm.
func newGPUEngine(c comm.Comm, o *options, log *slog.Logger) (compute.Engine, error) {
	return nil, errors.New("the CUDA compute engine is not part of this build yet")
}

// prepareGPULaunch adds what PEs of the nvshmem backend need to spec.
func prepareGPULaunch(o *options, spec *launch.Spec) error {
	return errors.New("the nvshmem backend is not part of this build yet")
}
