package comm_test

import (
	"errors"
	"fmt"

	"github.com/symddp/symddp/comm"
	_ "github.com/symddp/symddp/comm/shm" // registers the "shm" backend
)

// The life of a symmetric buffer on a one-PE job, which needs no launcher:
// allocate it collectively, write this PE's copy, reduce it across the PEs
// and read it back. On a job of N PEs every PE runs the same calls, and
// after the AllReduce every copy holds the sum over the PEs, bit for bit the
// same everywhere.
func Example() {
	c, err := comm.Open("shm", comm.Config{NPEs: 1})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	fmt.Printf("PE %d of %d on %s\n", c.MyPE(), c.NPEs(), c.Backend())

	b, err := c.Alloc(comm.Float32, 4) // collective; zeroed
	if err != nil {
		panic(err)
	}
	me := c.MyPE()
	if err := c.PutFloat32(b, 0, []float32{1, 2, 3, 4}, me); err != nil { // into my own copy
		panic(err)
	}
	if err := c.AllReduce(b, 0, 4, comm.Mean); err != nil {
		panic(err)
	}
	got := make([]float32, 4)
	if err := c.GetFloat32(got, b, 0, me); err != nil {
		panic(err)
	}
	fmt.Println("mean over PEs:", got)

	// Host backends also expose the local copy as a slice that aliases the
	// heap: the trainer views its arenas through it without copying.
	if hb, ok := b.(comm.HostBuffer); ok {
		hb.Float32s()[0] = 10
		fmt.Println("local copy:", hb.Float32s())
	}

	// Misuse is an error that wraps a sentinel, never a crash.
	err = c.PutFloat32(b, 3, []float32{1, 2}, me)
	fmt.Println(errors.Is(err, comm.ErrBounds))
	err = c.PutFloat32(b, 0, []float32{1}, 1)
	fmt.Println(errors.Is(err, comm.ErrPERange))
	if err := c.Free(b); err != nil {
		panic(err)
	}
	// Output:
	// PE 0 of 1 on shm
	// mean over PEs: [1 2 3 4]
	// local copy: [10 2 3 4]
	// true
	// true
}

// A backend is chosen by name among those linked into the program (a
// backend package registers itself when imported); the launcher's
// environment names it for a PE (see ConfigFromEnv).
func ExampleOpen() {
	fmt.Println(comm.Backends())
	_, err := comm.Open("carrier-pigeon", comm.Config{NPEs: 1})
	fmt.Println(err)
	// Output:
	// [shm]
	// comm: unknown backend "carrier-pigeon" (built in: shm)
}

// How a process learns that it is a PE: the launcher (comm/launch, `train
// --pes N`, ddp.Launch) sets SYMDDP_* variables; ConfigFromLookup reads
// them from any lookup function, ConfigFromEnv from the environment.
func ExampleConfigFromLookup() {
	env := map[string]string{"SYMDDP_PE": "2", "SYMDDP_NPES": "4", "SYMDDP_TIMEOUT": "90s"}
	cfg, backend, isPE, err := comm.ConfigFromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	fmt.Println(isPE, err, backend, cfg.PE, cfg.NPEs, cfg.Timeout)
	fmt.Println(cfg.Environ(backend))

	_, _, isPE, err = comm.ConfigFromLookup(func(string) (string, bool) { return "", false })
	fmt.Println(isPE, err)
	// Output:
	// true <nil> shm 2 4 1m30s
	// [SYMDDP_PE=2 SYMDDP_NPES=4 SYMDDP_BACKEND=shm SYMDDP_TIMEOUT=1m30s]
	// false <nil>
}
