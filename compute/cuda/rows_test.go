package cuda_test

import (
	"github.com/symddp/symddp/ddp/devicestep"
	"math"
	"testing"

	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
)

// testGatherRows: rows uploaded once (float rows, and byte rows with a value
// table) and gathered by index on the device give exactly the host's
// values, zeros for index -1, and a second upload of the same arrays is the
// same rows; the gather replays from a graph with new indices. Rows of 785
// values (not a multiple of 16 bytes) take the library's scalar kernel,
// rows of 784 (Fashion-MNIST's) its 4-wide one.
func testGatherRows(t *testing.T, e *cuda.Engine) {
	for _, cols := range []int{785, 784} {
		testGatherRowsOf(t, e, cols)
	}
}

func testGatherRowsOf(t *testing.T, e *cuda.Engine, cols int) {
	const n = 37
	x := make([]float32, n*cols)
	b := make([]byte, n*cols)
	var table [256]float32
	for i := range x {
		x[i] = float32(math.Sin(float64(i))) * 3
		b[i] = byte(i*131 + i/cols)
	}
	for i := range table {
		table[i] = (float32(i)/255 - 0.3) / 0.25
	}
	fr, err := e.UploadRows(x, nil, nil, cols)
	if err != nil {
		t.Fatal(err)
	}
	br, err := e.UploadRows(nil, b, &table, cols)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := e.UploadRows(x, nil, nil, cols); err != nil || again != fr {
		t.Fatalf("a second upload of the same rows: %v, %v; want the rows already there", again, err)
	}
	if fr.Rows() != n || fr.Cols() != cols || br.Bytes() != int64(n*cols+4*256) {
		t.Fatalf("rows %d×%d, byte rows %d bytes", fr.Rows(), fr.Cols(), br.Bytes())
	}
	check := func(what string, got []float32, idx []int32, value func(i, j int) float32) {
		t.Helper()
		for r, i := range idx {
			for j := 0; j < cols; j++ {
				want := float32(0)
				if i >= 0 {
					want = value(int(i), j)
				}
				if math.Float32bits(got[r*cols+j]) != math.Float32bits(want) {
					t.Fatalf("%s, %d columns: row %d (index %d) col %d: %v, want %v", what, cols, r, i, j, got[r*cols+j], want)
				}
			}
		}
	}
	idx := []int32{5, 0, -1, 36, 5}
	il := e.AllocLabels(len(idx))
	e.SetLabels(il, idx)
	dst := e.Alloc(len(idx), cols)
	got := make([]float32, len(idx)*cols)
	e.GatherResident(dst, fr, il)
	e.ReadTensor(got, dst)
	check("float rows", got, idx, func(i, j int) float32 { return x[i*cols+j] })
	e.GatherResident(dst, br, il)
	e.ReadTensor(got, dst)
	check("byte rows", got, idx, func(i, j int) float32 { return table[b[i*cols+j]] })

	if err := e.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	e.GatherResident(dst, br, il)
	g, err := e.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	idx2 := []int32{1, 2, 3, -1, 30}
	e.SetLabels(il, idx2)
	if err := g.Launch(devicestep.Values{}); err != nil {
		t.Fatal(err)
	}
	e.ReadTensor(got, dst)
	check("byte rows from a graph", got, idx2, func(i, j int) float32 { return table[b[i*cols+j]] })
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestGatherRowsGPU(t *testing.T)      { testGatherRows(t, gpuEngine(t)) }
func TestGatherRowsEmulated(t *testing.T) { testGatherRows(t, cudatest.NewEmulated(cuda.Options{})) }
