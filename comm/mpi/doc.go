// Package mpi is symddp's comm backend over MPI, for jobs that mpirun starts
// across hosts. It needs an MPI library at build time and is compiled only
// with the build tag "mpi" (go build -tags mpi); without the tag the package
// is empty and the default build needs no MPI. Debian: apt-get install
// openmpi-bin libopenmpi-dev (capi.go says where the headers are looked for).
// docs/MPI.md says how to build, launch and tune it.
//
// Every process that mpirun starts is one PE: PE = rank in MPI_COMM_WORLD.
// The mapping onto MPI:
//
//	symmetric heap   one MPI window per Alloc (MPI_Win_allocate), in a
//	                 passive-target epoch (MPI_Win_lock_all) for its whole life
//	put, get, p, g   MPI_Put / MPI_Get, completed with MPI_Win_flush_local /
//	                 MPI_Win_flush; to this PE itself a plain copy
//	put_signal       MPI_Put, MPI_Win_flush, then MPI_Accumulate on the signal
//	                 word (MPI_REPLACE for SignalSet, MPI_SUM for SignalAdd)
//	wait_until       polls MPI_Fetch_and_op(MPI_NO_OP) on its own signal word
//	fence, quiet     MPI_Win_flush_all on every window with puts outstanding
//	barrier          quiet, MPI_Barrier, MPI_Win_sync
//	allreduce        MPI_Allreduce in place on the window's local memory
//	reduce           MPI_Reduce (MPI_IN_PLACE at the root)
//	broadcast        MPI_Bcast
//
// Sum is MPI_SUM over MPI_FLOAT; Mean divides its result by NPEs on every
// PE; Max and Min are user-defined operators with Go's max and min semantics
// (NaN wins, -0 < +0). MPI does not fix the order in which it adds the PEs'
// values, so Comm.FixedOrder reports false (except in hierarchical mode on
// one host, below). What the trainer needs is that
// every PE gets the same bits, and Open MPI's allreduce algorithms give
// that: each reduces every element once (ring, Rabenseifner, reduce then
// broadcast) or in pairs that add the same two operands on both sides
// (recursive doubling), and float addition is commutative. The conformance
// suite and the trainer's replica check verify it on every run.
//
// In hierarchical mode (SYMDDP_MPI_HIERARCHICAL=1, see hier.go) the PEs of
// one host share their buffers' memory and reduce it among themselves with
// loads and stores, in PE order; only one slice per PE crosses hosts
// through MPI. On one host that is the shm backend's arithmetic, bit for
// bit.
//
// All MPI calls are serialised by one mutex (MPI_THREAD_SERIALIZED), so any
// goroutine may make them; MPI_Init_thread and MPI_Finalize run on one
// locked OS thread. Signal handlers that MPI_Init installs over the Go
// runtime's are put back. IAllReduce queues the allreduce for a goroutine of
// the Comm, which runs the queued requests in order while the caller
// computes; every synchronous collective first waits for the queue to
// drain.
//
// # Deadlines
//
// MPI calls cannot be abandoned, so a deadline that passes inside one ends
// the job: a watchdog goroutine prints a comm.TimeoutError naming the
// operation and calls MPI_Abort, and mpirun stops every process. Which PEs
// had not arrived is known through a small extra window: before each
// collective every PE writes its collective count into PE 0's copy (and PE
// 0 into PE 1's), so PE 0 names the PEs that did not arrive and PE 1 can
// tell whether PE 0 did; the other PEs wait a little longer before they
// fire, so that PE 0's message is the one that shows. WaitUntil polls, so
// it returns a *comm.TimeoutError like the other backends. Close is
// collective and, like every other collective, ends the job at the
// deadline when a peer never reaches it.
//
// The package registers itself as backend "mpi"; import it for its side
// effect (cmd/train does under the tag) and call comm.Open("mpi", cfg) in a
// process started by mpirun. MPI can be initialised once per process: after
// Close, Open fails with an error wrapping comm.ErrAlreadyInitialised.
package mpi
