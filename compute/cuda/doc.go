// Package cuda is symddp's CUDA compute engine: the operations of
// compute.Engine on device memory, through the project's C-ABI library
// (cuda/sd_compute*.cu, loaded by internal/cudalib): cuBLAS SGEMM (fp32, no
// TF32) and fused kernels for bias and ReLU, softmax cross-entropy, vectors,
// and the optimizer updates over a whole arena.
//
// It also computes in bf16 (compute.BF16Tensors, bf16.go): a bf16 copy of
// the fp32 masters, and bf16 plans of the Linear, attention, layer norm,
// embedding and classifier operations. Their kernels are the library's one
// compute ABI (cuda/symddp_compute.h), the same cudalib.Device methods as
// the fp32 ones: with cudalib.BFloat16 (layer norm, GELU, bias gradient,
// classifier), or their bf16 forms (the cast, the embedding, the GEMM plans
// sdc_bf16_gemm_* shared by the engine's layers, and the flash attention,
// sdc_attention_bf16 and sdc_grouped_attention_bf16, whose kernels the
// library picks: cuDNN's, mma.sync or wmma).
//
// Tensors are a device address, a shape and an element type (Tensor:
// float32, or bf16 for AllocBF16 and the masters' copies); views over
// compute.Arena{Dev, N} alias the arena, Alloc takes memory from a pool of
// device allocations made at build time, labels are device int32. All work
// goes on one CUDA stream, shared with the nvshmem comm backend (OnComm), so
// collectives and compute are ordered without host synchronisation: only
// ReadTensor, SumSquares and Sync wait for the device. Every reduction has a
// fixed order (no float atomics), so every run and every PE gets the same
// bits.
//
// Beyond compute.Engine the engine is ddp's DeviceUpdater (optimizer state
// in device memory, OptimizerState for checkpoints), records a training step
// into a CUDA graph (BeginCapture, EndCapture, Graph.Launch with the step's
// values) and double-buffers batches through pinned host memory on a copy
// stream (Pipeline).
//
// The package builds everywhere; New fails with an error wrapping
// cudalib.ErrUnavailable where there is no library, GPU or cgo. Tests on
// such machines run the engine on compute/cuda/cudatest's emulated device
// (cudatest.NewEmulated, through NewOnDevice).
package cuda
