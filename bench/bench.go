// Package bench holds the sources of symddp's reference benchmarks written in
// other languages, embedded so that the symbench command can build them on the
// machine it runs on, wherever the command was built.
//
// The directory also holds what symbench runs beside symddp as it is: the
// PyTorch and NCCL peers (torch_mlp_bench.py, torch_gpt_cpu_bench.py,
// torch_gpt_bench.py, torch_llama_bench.py, nccl_allreduce_bench.py;
// symbench's --scripts and --torch-script find them here, and so do the GPU
// check scripts), the Hugging Face layout checks (hf_gpt2_check.py,
// hf_llama_check.py), the description of symbench's figure (plotspec), and
// its plotter (symplot, a module of its own).
package bench

import _ "embed"

// MPIAllreduceC is the C source of mpi_allreduce, which times Open MPI's
// MPI_Allreduce the way `symbench allreduce` times the shm backend. Build it
// with mpicc; see the comment at its top for its arguments and output.
//
//go:embed mpi_allreduce.c
var MPIAllreduceC []byte
