package datasets

import (
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// byteRows has n samples of shape [2, 3]; byte k of sample i is 40*i + k
// and its label is i mod classes.
func byteRows(t testing.TB, n, classes int) *ByteSamples {
	t.Helper()
	x := make([]byte, n*6)
	y := make([]int32, n)
	for i := range n {
		for k := range 6 {
			x[i*6+k] = byte(40*i + k)
		}
		y[i] = int32(i % classes)
	}
	d, err := NewByteSamples(x, y, []int{2, 3}, classes)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestNewByteSamplesErrors(t *testing.T) {
	cases := []struct {
		name    string
		x       []byte
		y       []int32
		shape   []int
		classes int
		want    string
	}{
		{"empty", nil, nil, []int{4}, 3, "empty dataset"},
		{"no shape", make([]byte, 2), []int32{0, 1}, nil, 3, "sample shape is empty"},
		{"no classes", make([]byte, 4), []int32{0}, []int{4}, 0, "need at least one"},
		{"short x", make([]byte, 7), []int32{0, 1}, []int{4}, 3, "7 values for 2 samples of shape [4]: want 8"},
		{"label too large", make([]byte, 8), []int32{0, 3}, []int{4}, 3, "label 3 of sample 1 is outside [0, 3)"},
	}
	for _, c := range cases {
		if _, err := NewByteSamples(c.x, c.y, c.shape, c.classes); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestByteSamplesGather(t *testing.T) {
	d := byteRows(t, 5, 3)
	if d.Len() != 5 || d.Classes() != 3 || d.SampleSize() != 6 || !slices.Equal(d.SampleShape(), []int{2, 3}) || d.Mapped() {
		t.Fatalf("Len %d, Classes %d, SampleSize %d, SampleShape %v, Mapped %v",
			d.Len(), d.Classes(), d.SampleSize(), d.SampleShape(), d.Mapped())
	}
	x := make([]float32, 4*6)
	for i := range x {
		x[i] = 99 // padding rows must be cleared
	}
	y := make([]int32, 4)
	d.Gather([]int{4, -1, 0, 2}, x, y)
	for i, j := range []int{4, -1, 0, 2} {
		for k := range 6 {
			want := float32(0)
			if j >= 0 {
				want = float32(byte(40*j+k)) / 255
			}
			if got := x[i*6+k]; got != want {
				t.Errorf("row %d (sample %d) value %d = %v, want %v", i, j, k, got, want)
			}
		}
	}
	if !slices.Equal(y, []int32{1, -1, 0, 2}) {
		t.Errorf("labels %v, want [1 -1 0 2]", y)
	}
	for _, bad := range [][]int{{5}, {-2}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Gather(%v) did not panic", bad)
				}
			}()
			d.Gather(bad, x, y)
		}()
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Gather into a short x did not panic")
			}
		}()
		d.Gather([]int{0, 1}, x[:11], y)
	}()
}

// TestByteSamplesGatherOddWidth covers rows whose length is not a multiple
// of the decoder's unrolling.
func TestByteSamplesGatherOddWidth(t *testing.T) {
	x := []byte{1, 2, 3, 4, 5, 6, 7, 250, 251, 252, 253, 254, 255, 0}
	d, err := NewByteSamples(x, []int32{0, 1}, []int{7}, 2)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 14)
	y := make([]int32, 2)
	d.Gather([]int{1, 0}, out, y)
	for i, b := range append(x[7:], x[:7]...) {
		if want := float32(b) / 255; out[i] != want {
			t.Errorf("value %d = %v, want %v", i, out[i], want)
		}
	}
}

func TestByteSamplesGatherDoesNotAllocate(t *testing.T) {
	d := byteRows(t, 64, 10)
	idx := []int{3, -1, 63, 0, 17}
	x := make([]float32, len(idx)*6)
	y := make([]int32, len(idx))
	if n := testing.AllocsPerRun(100, func() { d.Gather(idx, x, y) }); n != 0 {
		t.Errorf("Gather allocates %v times per call, want 0", n)
	}
}

// TestByteSamplesMatchInMemory: LoadBytes + Normalize gives the same float32
// bits as Load + Normalize, raw or gzip, and Float32 the same dataset.
func TestByteSamplesMatchInMemory(t *testing.T) {
	mean, std, _ := PixelStats("fashion-mnist")
	for _, gz := range []bool{false, true} {
		dir := writeDataset(t, gz, nil)
		want, wantTest, err := Load("fashion-mnist", dir)
		if err != nil {
			t.Fatal(err)
		}
		train, test, err := LoadBytes("fashion-mnist", dir)
		if err != nil {
			t.Fatal(err)
		}
		if train.Mapped() != !gz || test.Mapped() != !gz {
			t.Errorf("gzip %v: Mapped %v/%v, want %v", gz, train.Mapped(), test.Mapped(), !gz)
		}
		if f := train.Float32(); !slices.Equal(f.X, want.X) || !slices.Equal(f.Y, want.Y) || !slices.Equal(f.SampleShape(), want.SampleShape()) {
			t.Errorf("gzip %v: Float32 differs from Load's dataset", gz)
		}
		want.Normalize(mean, std)
		wantTest.Normalize(mean, std)
		train.Normalize(mean, std)
		test.Normalize(mean, std)
		for _, pair := range []struct {
			a *InMemory
			b *ByteSamples
		}{{want, train}, {wantTest, test}} {
			idx := make([]int, pair.a.Len()+1)
			for i := range idx {
				idx[i] = i - 1 // padding first, then every sample
			}
			xa, xb := make([]float32, len(idx)*784), make([]float32, len(idx)*784)
			ya, yb := make([]int32, len(idx)), make([]int32, len(idx))
			pair.a.Gather(idx, xa, ya)
			pair.b.Gather(idx, xb, yb)
			for i := range xa {
				if math.Float32bits(xa[i]) != math.Float32bits(xb[i]) {
					t.Fatalf("gzip %v: value %d: %v from InMemory, %v from ByteSamples", gz, i, xa[i], xb[i])
				}
			}
			if !slices.Equal(ya, yb) {
				t.Errorf("gzip %v: labels differ", gz)
			}
		}
		if err := train.Close(); err != nil {
			t.Error(err)
		}
		if err := train.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := test.Close(); err != nil {
			t.Error(err)
		}
	}
}

func TestByteSamplesSubsetSplitShareTable(t *testing.T) {
	d := byteRows(t, 6, 3)
	sub := d.Subset(4)
	head, tail := d.Split(2)
	if d.Subset(6) != d || sub.Len() != 4 || head.Len() != 4 || tail.Len() != 2 {
		t.Fatalf("Subset/Split lengths: %d, %d, %d", sub.Len(), head.Len(), tail.Len())
	}
	if tail.X[0] != d.X[4*6] || tail.Y[1] != d.Y[5] {
		t.Errorf("tail starts at byte %d label %d, want %d and %d", tail.X[0], tail.Y[1], d.X[24], d.Y[5])
	}
	tail.Normalize(0.5, 0.25)
	b := d.X[6]
	want := (float32(b)/255 - 0.5) * (1 / float32(0.25))
	for name, s := range map[string]*ByteSamples{"d": d, "sub": sub, "head": head, "tail": tail} {
		if got := s.Value(b); got != want {
			t.Errorf("%s: Value(%d) = %v after Normalize on tail, want %v", name, b, got, want)
		}
	}
	var nan [256]float32
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	sub.SetValues(nan)
	if v := d.Value(7); !math.IsNaN(float64(v)) {
		t.Errorf("Value after SetValues on a subset = %v, want NaN", v)
	}
	for _, n := range []int{0, 6} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Split(%d) did not panic", n)
				}
			}()
			d.Split(n)
		}()
	}
}

func TestLoadBytesErrors(t *testing.T) {
	for _, c := range loadErrorCases() {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := LoadBytes("fashion-mnist", writeDataset(t, c.gz, c.edit))
			checkBadIDX(t, err, c.want...)
		})
	}
	// Raw files are mapped: trailing bytes are refused as ReadIDX refuses them.
	dir := writeDataset(t, false, func(files map[string][]byte) {
		files[testImagesFile] = append(files[testImagesFile], 7)
	})
	_, _, err := LoadBytes("fashion-mnist", dir)
	checkBadIDX(t, err, testImagesFile, "trailing data after the 3920 bytes declared by the header (5x28x28)")

	_, _, err = LoadBytes("fashion-mnist", filepath.Join(t.TempDir(), "absent"))
	if !errors.Is(err, ErrNotInstalled) {
		t.Errorf("LoadBytes of a missing directory: %v, want ErrNotInstalled", err)
	}
}

// TestUnpack: gzip files are written raw into dst, and LoadBytes maps them;
// raw files are used where they are.
func TestUnpack(t *testing.T) {
	gzDir := writeDataset(t, true, nil)
	dst := filepath.Join(t.TempDir(), "run", "fashion-mnist")
	got, err := Unpack("fashion-mnist", gzDir, dst)
	if err != nil || got != dst {
		t.Fatalf("Unpack = %q, %v; want %q", got, err, dst)
	}
	rawDir := writeDataset(t, false, nil)
	for _, f := range []string{trainImagesFile, trainLabelsFile, testImagesFile, testLabelsFile} {
		a, err := os.ReadFile(filepath.Join(dst, f))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(rawDir, f))
		if !slices.Equal(a, b) {
			t.Errorf("unpacked %s differs from the raw file", f)
		}
	}
	if entries, _ := os.ReadDir(dst); len(entries) != 4 {
		t.Errorf("%d entries in %s, want the 4 files", len(entries), dst)
	}
	train, test, err := LoadBytes("fashion-mnist", dst)
	if err != nil {
		t.Fatal(err)
	}
	if !train.Mapped() || !test.Mapped() || train.Len() != 12 || test.Len() != 5 {
		t.Errorf("LoadBytes of the unpacked files: mapped %v/%v, %d/%d samples", train.Mapped(), test.Mapped(), train.Len(), test.Len())
	}
	train.Close()
	test.Close()

	unused := filepath.Join(t.TempDir(), "unused")
	if got, err := Unpack("fashion-mnist", rawDir, unused); err != nil || got != rawDir {
		t.Errorf("Unpack of raw files = %q, %v; want %q", got, err, rawDir)
	}
	if _, err := os.Stat(unused); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Unpack of raw files created %s", unused)
	}
}

// TestUnpackErrors: bad gzip content is reported like Load reports it, and
// no file, complete or partial, is left under the final name.
func TestUnpackErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(map[string][]byte)
		want []string
	}{
		{"wrong magic", func(f map[string][]byte) { f[trainImagesFile][0] = 0x08 },
			[]string{trainImagesFile, "bad magic 0x08000803"}},
		{"truncated data", func(f map[string][]byte) { f[testImagesFile] = f[testImagesFile][:500] },
			[]string{testImagesFile, "truncated data: header declares 3920 bytes (5x28x28), input holds 484", "unexpected EOF"}},
		{"trailing data", func(f map[string][]byte) { f[trainLabelsFile] = append(f[trainLabelsFile], 1) },
			[]string{trainLabelsFile, "trailing data after the 12 bytes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "out")
			_, err := Unpack("fashion-mnist", writeDataset(t, true, c.edit), dst)
			checkBadIDX(t, err, c.want...)
			entries, _ := os.ReadDir(dst)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".") || strings.Contains(c.want[0], e.Name()) {
					t.Errorf("left %s in %s", e.Name(), dst)
				}
			}
		})
	}
	t.Run("corrupt gzip", func(t *testing.T) {
		dir := writeDataset(t, true, nil)
		path := filepath.Join(dir, trainImagesFile+".gz")
		b, _ := os.ReadFile(path)
		b[len(b)-6] ^= 0xff // inside the CRC-32 of the trailer
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Unpack("fashion-mnist", dir, filepath.Join(t.TempDir(), "out"))
		checkBadIDX(t, err, path)
	})
	t.Run("truncated gzip", func(t *testing.T) {
		dir := writeDataset(t, true, nil)
		path := filepath.Join(dir, testImagesFile+".gz")
		b, _ := os.ReadFile(path)
		if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Unpack("fashion-mnist", dir, filepath.Join(t.TempDir(), "out"))
		checkBadIDX(t, err, path)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("error %q does not wrap io.ErrUnexpectedEOF", err)
		}
	})
	_, err := Unpack("fashion-mnist", filepath.Join(t.TempDir(), "absent"), t.TempDir())
	if !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Unpack of a missing directory: %v, want ErrNotInstalled", err)
	}
}

// TestLoadBytesFashionMNIST maps the real data set where Debian's
// dataset-fashion-mnist is installed, after unpacking it.
func TestLoadBytesFashionMNIST(t *testing.T) {
	dir, _ := DefaultDir("fashion-mnist")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist): %v", err)
	}
	if testing.Short() {
		t.Skip("unpacks 55 MB")
	}
	raw, err := Unpack("fashion-mnist", "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	train, test, err := LoadBytes("fashion-mnist", raw)
	if err != nil {
		t.Fatal(err)
	}
	defer train.Close()
	defer test.Close()
	if train.Len() != 60000 || test.Len() != 10000 || len(train.X) != 60000*784 {
		t.Fatalf("got %d/%d samples", train.Len(), test.Len())
	}
	for c, n := range train.ClassCounts() {
		if n != 6000 {
			t.Errorf("train class %d: %d samples, want 6000", c, n)
		}
	}
}
