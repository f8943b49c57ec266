// Package nvshmem is symddp's GPU comm backend: the symmetric heap is
// NVSHMEM's (nvshmem_malloc on every PE's GPU), and the collectives are the
// project's own CUDA kernels over nvshmem_ptr peer pointers, synchronised by
// flags in symmetric memory with no host round trip. It reaches CUDA and
// NVSHMEM only through libsymddp_cuda.so (cuda/, built on a GPU host by
// cuda/build.sh), loaded at run time by internal/cudalib, so the package
// builds, and its tests pass, on machines without CUDA: Open then fails with
// an error wrapping comm.ErrUnavailable that says what is missing.
//
// The package registers itself as backend "nvshmem"; import it for its side
// effect and call comm.Open("nvshmem", cfg).
//
// # Start-up
//
// Under the project's launcher (SYMDDP_PE set; `train --backend nvshmem
// --pes 8`) PE 0 asks the library for an NVSHMEM unique id and writes it
// atomically to $SYMDDP_RUN_DIR/nvshmem.uid; the other PEs wait for the file
// (up to the deadline) and all call nvshmemx_init_attr with it. Under mpirun
// (comm/launch.DetectMPI) NVSHMEM's MPI bootstrap (PMIx for a PMIx-only
// launcher) is used instead. PE i uses GPU (local PE i) mod (GPUs on the
// host), so several PEs may share one GPU. The library sets
// NVSHMEM_DISABLE_NVLS=1 (NVLink multicast stays off) and, on one host,
// NVSHMEM_REMOTE_TRANSPORT=none unless the user set it.
//
// comm.Config.Options: "lib" is the library's path (see cudalib.Load for
// where it is looked for otherwise), "bootstrap" forces "uid", "mpi" or
// "pmix", "device" pins the GPU, "one_shot_max" sets the largest allreduce
// (bytes) done one-shot. Config.HeapSize sizes the symmetric heap
// (NVSHMEM_SYMMETRIC_SIZE gets it plus the library's own 64 MiB); zero means
// $NVSHMEM_SYMMETRIC_SIZE if set, else 1 GiB.
//
// # Semantics
//
// Buffers live in device memory and implement comm.DeviceBuffer; Stream
// returns the CUDA stream every collective runs on, so compute kernels can
// be ordered with them. One-sided operations copy between host slices and
// the peer's copy and are complete when they return. Collectives are
// enqueued on the stream and waited for with the deadline: a wait that
// passes it returns a *comm.TimeoutError naming the PEs that had not arrived
// (read from the flag slots), and a peer process that has gone is reported
// with comm.ErrPeerFailed. Sum is the float32 left fold over PEs 0..N-1 (the
// shm backend's bits: FixedOrder is true while every peer is reachable by
// pointer), Mean divides it by float32(N), BFloat16 buffers are reduced in
// float32 and rounded once.
//
// Comm is a comm.Sharder: ReduceScatter (Float32 or BFloat16) is the
// allreduce's fold over this PE's shard (comm.Shard) only, written into
// its own copy, so its bits are AllReduce's; AllGather (any kind) pushes
// every PE's shard into every peer's copy. Each is one kernel between flag
// barriers, its grid sized by the largest shard so that PEs with short or
// empty shards run the same blocks. With a peer out of pointer reach they
// become one Reduce, or one Broadcast, per PE of its shard. AllReduceEnqueue,
// ReduceScatterEnqueue and AllGatherEnqueue only enqueue (no event, no host
// wait), so that a CUDA graph can capture them.
//
// # Desync
//
// PEs that call different collectives (comm.ErrDesync) are caught as on
// shm, unless SYMDDP_DESYNC_CHECK is off (every PE must agree; Open checks):
// each collective's fingerprint travels in the arguments of its kernels,
// whose entry barrier compares every peer's with it before any data moves,
// so a training step replayed from a CUDA graph is checked too, at no extra
// round trip. With a peer out of pointer reach the calls that wait on the
// host are compared with one allgather first. See desync.go and
// docs/FAULTS.md.
package nvshmem
