package layertest_test

import (
	"fmt"

	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/models/layertest"
)

// A layer norm over 8 features, for 4 samples: its gain and bias (8 each)
// and its input (4×8) against central differences. In a test, call
// t.Fatal(err) when err is not nil.
func ExampleCheck() {
	e, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		panic(err)
	}
	n, err := layertest.Check(e, models.NewLayerNorm("ln", 8), 4, []int{8}, layertest.Options{})
	fmt.Println(n, "elements checked; error:", err)
	// Output: 48 elements checked; error: <nil>
}
