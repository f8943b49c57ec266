package launch

import (
	"errors"
	"os"
	"strings"
)

// nvidiaGPUs is the NVIDIA driver's directory of one entry per GPU.
const nvidiaGPUs = "/proc/driver/nvidia/gpus"

// GPUCount is the number of GPUs the PEs can use: CUDA_VISIBLE_DEVICES when
// set, else the NVIDIA driver's list, else libCount (a GPU library's device
// count, which may initialise CUDA in this process, so it comes last; nil
// when there is none). No GPU is an error.
func GPUCount(libCount func() (int, error)) (int, error) {
	return gpuCountFrom(os.LookupEnv, nvidiaGPUs, libCount)
}

// gpuCountFrom is GPUCount over any variable lookup and driver directory.
func gpuCountFrom(lookup func(string) (string, bool), driverDir string, libCount func() (int, error)) (int, error) {
	if v, ok := lookup("CUDA_VISIBLE_DEVICES"); ok {
		n := 0
		for _, f := range strings.Split(v, ",") {
			if strings.TrimSpace(f) != "" {
				n++
			}
		}
		if n == 0 {
			return 0, errors.New("CUDA_VISIBLE_DEVICES is empty: no GPU to run on")
		}
		return n, nil
	}
	if ents, err := os.ReadDir(driverDir); err == nil && len(ents) > 0 {
		return len(ents), nil
	}
	if libCount == nil {
		return 0, errors.New("no GPU found")
	}
	n, err := libCount()
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, errors.New("no GPU found")
	}
	return n, nil
}
