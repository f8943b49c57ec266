package traincmd

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	_ "github.com/symddp/symddp/comm/nvshmem" // the GPU backend
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/settings"
)

// newGPUEngine builds the CUDA engine on the nvshmem comm: it shares the
// comm's GPU library and CUDA stream, so that parameters and gradients stay
// in the symmetric heap and kernels and collectives are ordered on the
// device. --cuda-graph=false keeps the trainer from capturing its steps.
func newGPUEngine(c comm.Comm, o *options, log *slog.Logger) (compute.Engine, error) {
	e, err := cuda.OnComm(c, cuda.Options{DisableGraphs: !o.cudaGraph, Timeout: o.timeout, Logger: log})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// prepareGPULaunch adds what PEs of the nvshmem backend need to spec: the
// GPU library (found here once, so that a missing one is one clear error
// before any PE starts), NVSHMEM_DISABLE_NVLS=1 (NVLink multicast must stay
// off), and, when PEs share a GPU, a private MPS daemon (--mps).
func prepareGPULaunch(o *options, spec *launch.Spec, stderr io.Writer) error {
	spec.Env = append(spec.Env, "NVSHMEM_DISABLE_NVLS=1")
	lib, err := cudalib.Load(o.gpuLib)
	if err != nil {
		return fmt.Errorf("--backend nvshmem: %w", err)
	}
	spec.Env = append(spec.Env, cudalib.EnvLib+"="+lib.Path())
	gpus, err := launch.GPUCount(lib.DeviceCount)
	if err != nil {
		return fmt.Errorf("--backend nvshmem: %w", err)
	}
	perGPU := (o.pes + gpus - 1) / gpus
	if perGPU < 2 {
		if o.mps == "on" {
			fmt.Fprintf(stderr, "warning: --mps on: every PE has a GPU of its own (%d PEs, %d GPUs); no MPS daemon is needed\n", o.pes, gpus)
		}
		return nil
	}
	slow := fmt.Sprintf("%d PEs share each GPU without MPS: their kernels take turns on the GPU and every barrier costs milliseconds (expect a many-fold slowdown)", perGPU)
	if o.mps == "off" {
		fmt.Fprintln(stderr, "warning:", slow)
		return nil
	}
	control, err := launch.MPSControl()
	if err != nil {
		if o.mps == "on" {
			return fmt.Errorf("--mps on: %w", err)
		}
		fmt.Fprintf(stderr, "warning: %v; %s\n", err, slow)
		return nil
	}
	spec.MPS = &launch.MPS{PEsPerGPU: perGPU, Control: control}
	if w := mpsBucketWarning(o, perGPU); w != "" {
		fmt.Fprintln(stderr, w)
	}
	return nil
}

// overlapOnSharedGPU: --bucket-size asks for the overlapped reduction and
// perGPU PEs share each GPU.
func overlapOnSharedGPU(o *options, perGPU int) bool {
	n, err := bucketBytes(o.bucketSize)
	return err == nil && n > 0 && perGPU >= 2
}

// mpsBucketWarning is what train says when --bucket-size asks for the
// overlapped reduction on PEs that share a GPU under MPS (the default there
// is one reduction after backward): that it costs speed there, and that the
// bf16 GEMMs take one-block clusters (ddp tells the engine); "" otherwise.
func mpsBucketWarning(o *options, perGPU int) string {
	if !overlapOnSharedGPU(o, perGPU) {
		return ""
	}
	return fmt.Sprintf("warning: --bucket-size %s with %d PEs sharing each GPU under MPS: the bucket reductions take the SMs that "+
		"backward needs (8 PEs on one H100 trained GPT-2 124M 12%% slower with 25MiB buckets than with --bucket-size 0, the default "+
		"on a shared GPU); the bf16 GEMMs take one-block thread-block clusters there (with larger ones the overlapped reduction hung; "+
		"%s=0 keeps them; docs/GPU.md)", strings.TrimSpace(o.bucketSize), perGPU, settings.CUDANoCluster)
}

// jobDevices names the job's devices and counts them, for MFU: on the
// nvshmem backend the GPU's name and the GPUs the PEs run on (local PEs per
// host, sharing a host's GPUs when there are more PEs than GPUs); on the CPU
// backends "" and the hosts.
func jobDevices(c comm.Comm, local int) (name string, devices int) {
	local = max(1, local)
	hosts := (c.NPEs() + local - 1) / local
	ic, ok := c.(interface{ Info() cudalib.Info })
	if !ok {
		return "", hosts
	}
	info := ic.Info()
	return info.DeviceName, hosts * min(local, max(1, info.DeviceCount))
}
