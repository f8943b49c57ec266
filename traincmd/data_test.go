package traincmd

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symddp/symddp/datasets"
)

// writeTinyIDX writes a gzip-compressed Fashion-MNIST look-alike of n
// training and m test images (pixel k of image i is byte(i+k), label i mod
// 10) into a new directory.
func writeTinyIDX(t *testing.T, n, m int) string {
	t.Helper()
	dir := t.TempDir()
	encode := func(dims []int, data []byte) []byte {
		h := []byte{0, 0, 8, byte(len(dims))}
		for _, d := range dims {
			h = binary.BigEndian.AppendUint32(h, uint32(d))
		}
		return append(h, data...)
	}
	write := func(name string, raw []byte) {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(raw)
		zw.Close()
		if err := os.WriteFile(filepath.Join(dir, name+".gz"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, split := range []struct {
		images, labels string
		count          int
	}{{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", n}, {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", m}} {
		pixels, labels := make([]byte, split.count*784), make([]byte, split.count)
		for i := range split.count {
			for k := range 784 {
				pixels[i*784+k] = byte(i + k)
			}
			labels[i] = byte(i % 10)
		}
		write(split.images, encode([]int{split.count, 28, 28}, pixels))
		write(split.labels, encode([]int{split.count}, labels))
	}
	return dir
}

// TestLoadDataShared: PE 0 unpacks into the run directory, every PE maps the
// files after the barrier, and the values are the standardised pixels.
func TestLoadDataShared(t *testing.T) {
	dc := dataChoice{name: "fashion-mnist", dir: writeTinyIDX(t, 12, 5)}
	runDir := t.TempDir()
	barriers := 0
	barrier := func() error { barriers++; return nil }
	mean, std, _ := datasets.PixelStats("fashion-mnist")
	for _, first := range []bool{true, false} {
		train, test, err := loadData(dc, 1, 0, dataShare{runDir: runDir, first: first, barrier: barrier})
		if err != nil {
			t.Fatal(err)
		}
		tr, ok1 := train.(*datasets.ByteSamples)
		te, ok2 := test.(*datasets.ByteSamples)
		if !ok1 || !ok2 || !tr.Mapped() || !te.Mapped() || tr.Len() != 12 || te.Len() != 5 {
			t.Fatalf("first %v: got %T and %T, want mapped ByteSamples of 12 and 5 samples", first, train, test)
		}
		x, y := make([]float32, 784), make([]int32, 1)
		tr.Gather([]int{3}, x, y)
		if want := (float32(byte(3+10))/255 - mean) * (1 / std); x[10] != want || y[0] != 3 {
			t.Errorf("first %v: value 10 of sample 3 = %v label %d, want %v and 3", first, x[10], y[0], want)
		}
	}
	if barriers != 2 {
		t.Errorf("%d barriers for two PEs' loads, want 2", barriers)
	}
	if entries, _ := os.ReadDir(filepath.Join(runDir, "data-fashion-mnist")); len(entries) != 4 {
		t.Errorf("%d files unpacked in the run directory, want 4", len(entries))
	}
}

// TestLoadDataFallbacks: a PE whose PE 0 could not unpack reads the files
// itself; without a run directory a PE unpacks privately and removes the
// files; a failed barrier is an error.
func TestLoadDataFallbacks(t *testing.T) {
	dc := dataChoice{name: "fashion-mnist", dir: writeTinyIDX(t, 12, 5)}
	ok := func() error { return nil }
	train, _, err := loadData(dc, 1, 0, dataShare{runDir: t.TempDir(), first: false, barrier: ok})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := train.(*datasets.ByteSamples); b == nil || b.Mapped() {
		t.Errorf("without unpacked files: %T mapped %v, want ByteSamples in memory", train, b != nil && b.Mapped())
	}

	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	train, _, err = loadData(dc, 1, 7, dataShare{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := train.(*datasets.ByteSamples); b == nil || !b.Mapped() || b.Len() != 7 {
		t.Errorf("private unpack: got %T, want mapped ByteSamples of 7 samples (--train-limit)", train)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("private unpack left %d entries in TMPDIR", len(entries))
	}

	stuck := errors.New("PE 1 is gone")
	if _, _, err := loadData(dc, 1, 0, dataShare{runDir: t.TempDir(), barrier: func() error { return stuck }}); !errors.Is(err, stuck) {
		t.Errorf("failed barrier: error %v, want one wrapping %v", err, stuck)
	}
}

// TestTrainSharedData trains on two PEs from gzip files, which PE 0 unpacks
// into the job's run directory for both.
func TestTrainSharedData(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := trainBinary(t)
	dir := writeTinyIDX(t, 40, 12)
	cmd := exec.Command(bin, "--pes", "2", "--data-dir", dir, "--batch-size", "8", "--max-steps", "6",
		"--no-progress", "--hidden", "8")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "replicas identical on both PEs") || !strings.Contains(string(out), "(12 samples)") {
		t.Errorf("output lacks the replica check or the 12 test samples:\n%s", out)
	}
}
