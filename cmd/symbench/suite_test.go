package main

import (
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// allReduceTable is the start of a table as `symbench allreduce --format
// markdown` prints it, with Open MPI missing in one row.
const allReduceTable = `allreduce, float32 sum in place; busbw = bytes·2(N−1)/N / time
host: test

| N | size | shm time | shm busbw | MPI time | MPI busbw | shm/MPI |
|---:|---:|---:|---:|---:|---:|---:|
| 2 | 4 KiB | 0.8 µs | 4.88 GB/s | 3.2 µs | 1.27 GB/s | 3.85× |
| 2 | 64 MiB | 8.87 ms | 7.56 GB/s | - | - | - |
| 8 | 1 MiB | 512.6 µs | 3.58 GB/s | 1.29 ms | 1.42 GB/s | 2.51× |
`

func TestParseAllReduceMarkdown(t *testing.T) {
	pts, err := parseAllReduceMarkdown(allReduceTable)
	if err != nil {
		t.Fatal(err)
	}
	want := []busbwPoint{{2, 4 << 10, 4.88, 1.27}, {2, 64 << 20, 7.56, 0}, {8, 1 << 20, 3.58, 1.42}}
	if !slices.Equal(pts, want) {
		t.Errorf("parsed %+v, want %+v", pts, want)
	}
	if _, err := parseAllReduceMarkdown("no table here\n"); err == nil {
		t.Error("output without a table was accepted")
	}
	bad := strings.Replace(allReduceTable, "4.88 GB/s", "fast", 1)
	if _, err := parseAllReduceMarkdown(bad); err == nil || !strings.Contains(err.Error(), `"fast"`) {
		t.Errorf("bad cell: error %v", err)
	}
}

func TestCompareGPUResults(t *testing.T) {
	ours := "table...\nRESULT symddp model=784-256-256-10 batch=256 eager=100000 graph=300000\n" +
		"RESULT symddp model=784-1024-1024-1024-1024-10 batch=1024 eager=50000 graph=60000\n"
	theirs := "RESULT torch model=784-256-256-10 batch=256 eager=150000 graph=200000\n"
	rows := compareGPUResults(ours, theirs)
	want := [][]string{
		{"784-256-256-10", "256", "100000", "300000", "150000", "200000", "1.50×"},
		{"784-1024-1024-1024-1024-10", "1024", "50000", "60000", "-", "-", "-"},
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("rows %q, want %q", rows, want)
	}
}

// TestWriteSuitePlot: the plot is a PNG of the intended size, with data and
// with none.
func TestWriteSuitePlot(t *testing.T) {
	pts, err := parseAllReduceMarkdown(allReduceTable)
	if err != nil {
		t.Fatal(err)
	}
	rep := fakeReport()
	for name, c := range map[string]struct {
		ar []busbwPoint
		tr *cpuTrainReport
	}{"data": {pts, &rep}, "empty": {nil, nil}} {
		path := filepath.Join(t.TempDir(), "plot.png")
		if err := writeSuitePlot(path, c.ar, c.tr); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() != 13*96 || b.Dy() != 5*96 {
			t.Errorf("%s: image of %v, want 1248x480", name, b)
		}
	}
}

func TestSuiteFlags(t *testing.T) {
	o, err := parseSuiteFlags([]string{"--out", "x", "--skip", "gpu", "--train-args", "--reps 1 --pes 1,2"})
	if err != nil || o.out != "x" || !slices.Equal(o.skip, []string{"gpu"}) || !slices.Equal(o.train, []string{"--reps", "1", "--pes", "1,2"}) {
		t.Fatalf("parseSuiteFlags = %+v, %v", o, err)
	}
	if _, err := parseSuiteFlags([]string{"--skip", "everything"}); err == nil {
		t.Error("--skip everything accepted")
	}
}
