package datasets

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tinySplit is a split of n 28x28 images whose pixel k of image i is
// byte(i+k), and whose labels are i mod 10.
func tinySplit(n int) (images, labels []byte) {
	pixels := make([]byte, n*28*28)
	for i := range n {
		for k := range 28 * 28 {
			pixels[i*28*28+k] = byte(i + k)
		}
	}
	y := make([]byte, n)
	for i := range y {
		y[i] = byte(i % 10)
	}
	return encodeIDX([]int{n, 28, 28}, pixels), encodeIDX([]int{n}, y)
}

// writeDataset writes the four files of a 12/5 dataset into a new
// directory, gzip-compressed or raw, after letting edit change any of them.
func writeDataset(t *testing.T, gz bool, edit func(files map[string][]byte)) string {
	t.Helper()
	files := map[string][]byte{}
	files[trainImagesFile], files[trainLabelsFile] = tinySplit(12)
	files[testImagesFile], files[testLabelsFile] = tinySplit(5)
	if edit != nil {
		edit(files)
	}
	dir := t.TempDir()
	for name, content := range files {
		if gz {
			name, content = name+".gz", gzipBytes(t, content)
		}
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadTinyDataset(t *testing.T) {
	for _, gz := range []bool{false, true} {
		train, test, err := Load("mnist", writeDataset(t, gz, nil))
		if err != nil {
			t.Fatalf("gzip %v: %v", gz, err)
		}
		if train.Len() != 12 || test.Len() != 5 || train.Classes() != 10 ||
			!slices.Equal(train.SampleShape(), []int{784}) || !slices.Equal(test.SampleShape(), []int{784}) {
			t.Fatalf("gzip %v: got %d/%d samples of shape %v, %d classes", gz,
				train.Len(), test.Len(), train.SampleShape(), train.Classes())
		}
		// Pixel k of image i is byte(i+k)/255, exactly.
		for _, ik := range [][2]int{{0, 0}, {3, 10}, {11, 783}, {7, 250}} {
			i, k := ik[0], ik[1]
			if got, want := train.X[i*784+k], float32(byte(i+k))/255; got != want {
				t.Errorf("gzip %v: pixel %d of image %d = %v, want %v", gz, k, i, got, want)
			}
		}
		if !slices.Equal(test.Y, []int32{0, 1, 2, 3, 4}) {
			t.Errorf("gzip %v: test labels %v", gz, test.Y)
		}
	}
}

// loadErrorCase is a dataset directory with one fault and fragments of the
// message every loader must give for it.
type loadErrorCase struct {
	name string
	gz   bool
	edit func(map[string][]byte)
	want []string // fragments of the message, the file name among them
}

func loadErrorCases() []loadErrorCase {
	mutate := func(file string, f func([]byte) []byte) func(map[string][]byte) {
		return func(files map[string][]byte) { files[file] = f(files[file]) }
	}
	return []loadErrorCase{
		{"wrong magic", false, mutate(trainImagesFile, func(b []byte) []byte { b[0] = 0x08; return b }),
			[]string{trainImagesFile, "bad magic 0x08000803"}},
		{"labels as images", false, mutate(testImagesFile, func([]byte) []byte { _, l := tinySplit(5); return l }),
			[]string{testImagesFile, "images need 3 dimensions, the header declares 1 (5)"}},
		{"images as labels", false, mutate(trainLabelsFile, func([]byte) []byte { i, _ := tinySplit(12); return i }),
			[]string{trainLabelsFile, "labels need 1 dimensions, the header declares 3 (12x28x28)"}},
		{"truncated data", false, mutate(trainImagesFile, func(b []byte) []byte { return b[:len(b)-100] }),
			[]string{trainImagesFile, "truncated data: header declares 9408 bytes (12x28x28), input holds 9308"}},
		{"count mismatch", false, mutate(testLabelsFile, func([]byte) []byte { return encodeIDX([]int{4}, []byte{1, 2, 3, 4}) }),
			[]string{testImagesFile + " holds 5 images", testLabelsFile + " holds 4 labels", "count mismatch"}},
		{"label out of range", true, mutate(trainLabelsFile, func(b []byte) []byte { b[len(b)-2] = 10; return b }),
			[]string{trainLabelsFile, "label 10 of item 10 is outside [0, 10)"}},
		{"empty dataset", false, func(files map[string][]byte) {
			files[testImagesFile], files[testLabelsFile] = encodeIDX([]int{0, 28, 28}, nil), encodeIDX([]int{0}, nil)
		}, []string{testImagesFile, "0 images"}},
		{"wrong image size", false, mutate(trainImagesFile, func([]byte) []byte { return encodeIDX([]int{12, 2, 2}, ramp(48)) }),
			[]string{trainImagesFile, "images are 4 values each, want 28x28"}},
	}
}

func TestLoadErrors(t *testing.T) {
	for _, c := range loadErrorCases() {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Load("fashion-mnist", writeDataset(t, c.gz, c.edit))
			checkBadIDX(t, err, c.want...)
		})
	}
}

func TestLoadTruncatedGzip(t *testing.T) {
	dir := writeDataset(t, true, nil)
	path := filepath.Join(dir, testImagesFile+".gz")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = Load("fashion-mnist", dir)
	checkBadIDX(t, err, "read "+path+": ", "unexpected EOF")
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %q does not wrap io.ErrUnexpectedEOF", err)
	}
}

// checkBadIDX checks that err reports bad content, not missing files, in a
// message that contains every fragment of want.
func checkBadIDX(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Load succeeded, want an error containing %q", want)
	}
	if !errors.Is(err, ErrBadIDX) || errors.Is(err, ErrNotInstalled) {
		t.Errorf("error %q: want ErrBadIDX and not ErrNotInstalled", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func TestLoadNotInstalled(t *testing.T) {
	missingDir := filepath.Join(t.TempDir(), "absent")
	partial := writeDataset(t, true, nil)
	if err := os.Remove(filepath.Join(partial, testLabelsFile+".gz")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, dir, file string
	}{
		{"no directory", missingDir, trainImagesFile},
		{"one file missing", partial, testLabelsFile},
	}
	for _, c := range cases {
		_, _, err := Load("fashion-mnist", c.dir)
		var nie *NotInstalledError
		if !errors.Is(err, ErrNotInstalled) || !errors.Is(err, os.ErrNotExist) || !errors.As(err, &nie) {
			t.Fatalf("%s: error %v: want a *NotInstalledError wrapping ErrNotInstalled and os.ErrNotExist", c.name, err)
		}
		want := NotInstalledError{Name: "fashion-mnist", Dir: c.dir, File: c.file, Package: "dataset-fashion-mnist"}
		if *nie != want {
			t.Errorf("%s: got %+v, want %+v", c.name, *nie, want)
		}
		if !strings.Contains(err.Error(), c.file+".gz in "+c.dir) ||
			!strings.Contains(nie.Hint(), "apt-get install dataset-fashion-mnist") {
			t.Errorf("%s: message %q, hint %q", c.name, err, nie.Hint())
		}
	}
	_, _, err := Load("mnist", missingDir)
	var nie *NotInstalledError
	if !errors.As(err, &nie) || nie.Package != "" || strings.Contains(nie.Hint(), "apt-get") {
		t.Errorf("mnist: error %v: want a *NotInstalledError without a Debian package", err)
	}
}

func TestLoadUnknownName(t *testing.T) {
	_, _, err := Load("cifar10", "")
	if err == nil || errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "fashion-mnist, mnist") {
		t.Fatalf("error %v: want an unknown-dataset error listing the known names", err)
	}
	if _, _, err := PixelStats("cifar10"); err == nil {
		t.Error("PixelStats of an unknown name succeeded")
	}
	if dir, err := DefaultDir("fashion-mnist"); err != nil || dir != "/usr/share/datasets/fashion-mnist" {
		t.Errorf("DefaultDir(fashion-mnist) = %q, %v", dir, err)
	}
}

// TestLoadFashionMNIST reads the real data set where Debian's
// dataset-fashion-mnist is installed.
func TestLoadFashionMNIST(t *testing.T) {
	dir, _ := DefaultDir("fashion-mnist")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist): %v", err)
	}
	train, test, err := Load("fashion-mnist", "")
	if err != nil {
		t.Fatal(err)
	}
	if train.Len() != 60000 || test.Len() != 10000 || train.Classes() != 10 ||
		!slices.Equal(train.SampleShape(), []int{784}) || len(train.X) != 60000*784 || len(test.X) != 10000*784 {
		t.Fatalf("got %d/%d samples of shape %v", train.Len(), test.Len(), train.SampleShape())
	}
	for c, n := range train.ClassCounts() {
		if n != 6000 {
			t.Errorf("train class %d: %d samples, want 6000", c, n)
		}
	}
	for c, n := range test.ClassCounts() {
		if n != 1000 {
			t.Errorf("test class %d: %d samples, want 1000", c, n)
		}
	}
	// The fixed standardisation constants are the training set's own.
	mean, std := train.MeanStd()
	fixedMean, fixedStd, _ := PixelStats("fashion-mnist")
	if d, e := mean-fixedMean, std-fixedStd; d*d > 1e-8 || e*e > 1e-8 {
		t.Errorf("training pixels have mean %v and std %v; PixelStats says %v and %v", mean, std, fixedMean, fixedStd)
	}
}

func TestCheckInstalledMissing(t *testing.T) {
	err := CheckInstalled("fashion-mnist", t.TempDir())
	var ni *NotInstalledError
	if !errors.As(err, &ni) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("CheckInstalled on an empty dir = %v, want a *NotInstalledError wrapping os.ErrNotExist", err)
	}
	if err := CheckInstalled("cifar", t.TempDir()); err == nil {
		t.Fatal("CheckInstalled of an unknown dataset returned nil")
	}
}
