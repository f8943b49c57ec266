package ddp_test

import (
	"context"
	"fmt"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/ddp"
)

// A program's main starts its PEs with Launch. Run by hand with PEs: 4, it
// re-executes itself as four PE processes, and each of them gets to the
// function; under mpirun every process is a PE already. One PE, as here,
// runs in this process.
func ExampleLaunch() {
	job := ddp.Job{PEs: 1} // typically from a --pes flag
	err := ddp.Launch(context.Background(), job, func(ctx context.Context, c comm.Comm) error {
		// Build the engine, model, optimizer and data here and call
		// ddp.New(c, ...) and Fit(ctx, ...), as in the package example.
		fmt.Printf("PE %d of %d on %s\n", c.MyPE(), c.NPEs(), c.Backend())
		return nil
	})
	if err != nil {
		// A program prints err and exits with launch.ExitCode(err): the
		// status of the PE that failed, or 130 after Ctrl-C.
		fmt.Println(err)
	}
	// Output:
	// PE 0 of 1 on shm
}
