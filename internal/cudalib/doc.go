// Package cudalib loads libsymddp_cuda.so, the project's C-ABI GPU library
// (sources and build script in cuda/), with dlopen and calls it through cgo.
//
// Nothing CUDA is needed to build this package: the cgo side includes only
// <dlfcn.h> and the headers in cuda/, and every entry point is bound with
// dlsym when the library is loaded. Built without cgo, Load always fails
// with an error wrapping ErrUnavailable. The library itself is built on a
// GPU host by cuda/build.sh.
//
// Load looks for the library in this order: the explicit path it is given
// (the comm backend's Options["lib"], a command's flag), $SYMDDP_CUDA_LIB, the
// directory of the running executable, and build/libsymddp_cuda.so in the
// working directory and its parents up to the module root. A library is
// loaded once per process and shared.
//
// Every method is one C entry point with Go types in and out. A failed call
// returns an *Error carrying the library's message (file:line and the failing
// CUDA or NVSHMEM call); errors.Is matches it against ErrNoDevice,
// ErrTimeout, ErrNoMemory, ErrArgument or ErrState.
//
// The library has one compute ABI (cuda/symddp_compute.h, sdc_*, bound by
// OpenCompute): the bf16 kernels of the compute operations, the flash
// attention's among them, are Context methods like the fp32 ones; an entry
// point with kernels for both takes a DType (sdc_dtype), the attention the
// kernels to run (AttentionImpl, sdc_attn).
//
// The C side of every entry point (its table entry and wrapper), its Go
// method for the compute entry points, the stand-ins for builds without cgo
// and the ABI versions are generated from the headers in cuda/ by
// internal/cudalib/gen: after a change of a header, run go generate
// ./internal/cudalib.
package cudalib

//go:generate go run ./gen
