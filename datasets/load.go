package datasets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrNotInstalled is wrapped by the error of Load when a dataset's files are
// not in its directory. It wraps os.ErrNotExist. The error itself is a
// *NotInstalledError, which says what is missing and how to get it.
var ErrNotInstalled = fmt.Errorf("dataset not installed: %w", os.ErrNotExist)

// NotInstalledError reports that a named dataset's IDX files are missing.
type NotInstalledError struct {
	Name    string // the dataset, "fashion-mnist"
	Dir     string // the directory searched
	File    string // the first missing file, without ".gz"
	Package string // the Debian package that installs the data; "" if none
}

// Error says which file is missing from which directory.
func (e *NotInstalledError) Error() string {
	return fmt.Sprintf("load %s: not installed: neither %s nor %s.gz in %s", e.Name, e.File, e.File, e.Dir)
}

// Unwrap returns ErrNotInstalled.
func (e *NotInstalledError) Unwrap() error { return ErrNotInstalled }

// Hint is one line telling a person how to get the data.
func (e *NotInstalledError) Hint() string {
	files := "the four IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, " +
		"t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, raw or .gz)"
	if e.Package == "" {
		return fmt.Sprintf("put %s of %s in a directory and pass it as the data directory", files, e.Name)
	}
	return fmt.Sprintf("install them with `apt-get install %s`, or pass a directory holding %s as the data directory",
		e.Package, files)
}

// idxDataset describes one named dataset stored as four IDX files.
type idxDataset struct {
	name       string
	dir        string  // where Debian installs it
	pkg        string  // the Debian package, "" if none
	mean, std  float32 // of the training pixels after /255
	rows, cols int
	classes    int
}

var idxDatasets = []idxDataset{
	{name: "fashion-mnist", dir: "/usr/share/datasets/fashion-mnist", pkg: "dataset-fashion-mnist",
		mean: 0.2860, std: 0.3530, rows: 28, cols: 28, classes: 10},
	{name: "mnist", dir: "/usr/share/datasets/mnist",
		mean: 0.1307, std: 0.3081, rows: 28, cols: 28, classes: 10},
}

// The file names shared by MNIST and Fashion-MNIST, each raw or with ".gz".
const (
	trainImagesFile = "train-images-idx3-ubyte"
	trainLabelsFile = "train-labels-idx1-ubyte"
	testImagesFile  = "t10k-images-idx3-ubyte"
	testLabelsFile  = "t10k-labels-idx1-ubyte"
)

func lookupIDXDataset(name string) (idxDataset, error) {
	for _, d := range idxDatasets {
		if d.name == name {
			return d, nil
		}
	}
	names := make([]string, len(idxDatasets))
	for i, d := range idxDatasets {
		names[i] = d.name
	}
	return idxDataset{}, fmt.Errorf("unknown dataset %q: known are %s", name, strings.Join(names, ", "))
}

// DefaultDir is the directory where Load looks for a named dataset when it is
// given none: /usr/share/datasets/fashion-mnist (Debian's
// dataset-fashion-mnist) and /usr/share/datasets/mnist.
func DefaultDir(name string) (string, error) {
	d, err := lookupIDXDataset(name)
	return d.dir, err
}

// PixelStats returns fixed standardisation constants of a named dataset: the
// mean and standard deviation of its training pixels after the division by
// 255 (Fashion-MNIST 0.2860 and 0.3530, MNIST 0.1307 and 0.3081). The train
// command applies them to both splits with Normalize; being fixed, they do not
// change with a Subset.
func PixelStats(name string) (mean, std float32, err error) {
	d, err := lookupIDXDataset(name)
	return d.mean, d.std, err
}

// Load reads the training and test splits of "fashion-mnist" or "mnist" from
// dir ("" means DefaultDir(name)); each file may be raw or gzip-compressed
// (name or name.gz; the raw one when both exist).
// Pixels are scaled to [0, 1] (divided by 255) and not standardised: see
// PixelStats and Normalize. Samples have shape [784], labels are 0..9.
//
// When a file is missing, the error is a *NotInstalledError wrapping
// ErrNotInstalled; every other error names the file and what is wrong with it.
func Load(name, dir string) (train, test *InMemory, err error) {
	spec, paths, err := findIDXFiles(name, dir)
	if err != nil {
		return nil, nil, err
	}
	if train, err = loadSplit(spec, paths[0], paths[1]); err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", name, err)
	}
	if test, err = loadSplit(spec, paths[2], paths[3]); err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", name, err)
	}
	return train, test, nil
}

// CheckInstalled reports whether the four IDX files of name are in dir (""
// means DefaultDir(name)) without reading them: nil, a *NotInstalledError, or
// another error naming the path. Launchers use it to decide before starting
// PEs.
func CheckInstalled(name, dir string) error {
	_, _, err := findIDXFiles(name, dir)
	return err
}

// findIDXFiles locates the training and test files of name in dir.
func findIDXFiles(name, dir string) (spec idxDataset, paths [4]string, err error) {
	if spec, err = lookupIDXDataset(name); err != nil {
		return spec, paths, err
	}
	if dir == "" {
		dir = spec.dir
	}
	for i, file := range []string{trainImagesFile, trainLabelsFile, testImagesFile, testLabelsFile} {
		if paths[i], err = findIDXFile(spec, dir, file); err != nil {
			return spec, paths, err
		}
	}
	return spec, paths, nil
}

// findIDXFile returns dir/file, or dir/file.gz when only that exists.
func findIDXFile(spec idxDataset, dir, file string) (string, error) {
	for _, path := range []string{filepath.Join(dir, file), filepath.Join(dir, file+".gz")} {
		info, err := os.Stat(path)
		switch {
		case err == nil && info.Mode().IsRegular():
			return path, nil
		case err == nil:
			return "", fmt.Errorf("load %s: %s is not a regular file", spec.name, path)
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("load %s: %w", spec.name, err)
		}
	}
	return "", &NotInstalledError{Name: spec.name, Dir: dir, File: file, Package: spec.pkg}
}

// loadSplit reads one split and checks that its images have the dataset's shape.
func loadSplit(spec idxDataset, imagesPath, labelsPath string) (*InMemory, error) {
	d, err := LoadIDXPair(imagesPath, labelsPath, spec.classes)
	if err != nil {
		return nil, err
	}
	if want := []int{spec.rows * spec.cols}; !slices.Equal(d.SampleShape(), want) {
		return nil, fmt.Errorf("read %s: %w: images are %d values each, want %dx%d",
			imagesPath, ErrBadIDX, d.SampleSize(), spec.rows, spec.cols)
	}
	return d, nil
}

// LoadIDXPair reads an IDX file of images (3 dimensions: count, rows, columns)
// and one of labels (1 dimension: count), raw or gzip-compressed, and returns
// them as a dataset of flattened samples, shape [rows*cols], with pixels
// divided by 255. It checks that both hold the same positive count and that
// every label is in [0, classes). Errors name the file at fault.
func LoadIDXPair(imagesPath, labelsPath string, classes int) (*InMemory, error) {
	images, err := readIDXFile(imagesPath, 3, "images")
	if err != nil {
		return nil, err
	}
	labels, err := readIDXFile(labelsPath, 1, "labels")
	if err != nil {
		return nil, err
	}
	y, err := idxLabels(images, labels, imagesPath, labelsPath, classes)
	if err != nil {
		return nil, err
	}
	x := make([]float32, len(images.Data))
	scale := pixelScale()
	for i, b := range images.Data {
		x[i] = scale[b]
	}
	return NewInMemory(x, y, []int{images.Dims[1] * images.Dims[2]}, classes)
}

// idxLabels checks that images (count, rows, columns) and labels (count)
// agree and that every label is in [0, classes), and returns the labels.
func idxLabels(images, labels *IDX, imagesPath, labelsPath string, classes int) ([]int32, error) {
	n := images.Dims[0]
	switch {
	case n == 0:
		return nil, fmt.Errorf("read %s: %w: 0 images (dimensions %s)", imagesPath, ErrBadIDX, dimsString(images.Dims))
	case images.Dims[1] == 0 || images.Dims[2] == 0:
		return nil, fmt.Errorf("read %s: %w: empty images (dimensions %s)", imagesPath, ErrBadIDX, dimsString(images.Dims))
	case labels.Dims[0] != n:
		return nil, fmt.Errorf("%w: count mismatch: %s holds %d images, %s holds %d labels",
			ErrBadIDX, imagesPath, n, labelsPath, labels.Dims[0])
	}
	y := make([]int32, n)
	for i, b := range labels.Data {
		if int(b) >= classes {
			return nil, fmt.Errorf("read %s: %w: label %d of item %d is outside [0, %d)", labelsPath, ErrBadIDX, b, i, classes)
		}
		y[i] = int32(b)
	}
	return y, nil
}

// pixelScale maps a byte b to float32(b)/255, correctly rounded.
func pixelScale() *[256]float32 {
	var t [256]float32
	for b := range t {
		t[b] = float32(b) / 255
	}
	return &t
}

// readIDXFile reads one IDX file and checks its number of dimensions.
func readIDXFile(path string, ndims int, what string) (*IDX, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	a, err := ReadIDX(f)
	if err == nil {
		err = checkDims(a, ndims, what)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return a, nil
}
