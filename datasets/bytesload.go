package datasets

import (
	"bytes"
	"fmt"
	"io"
	"slices"
)

// LoadBytes reads the training and test splits of "fashion-mnist" or
// "mnist" from dir ("" means DefaultDir(name)) like Load, but keeps the
// pixels as bytes: values are b/255 until Normalize. A raw IDX images file is
// memory-mapped read-only, so the processes of a host that load the same
// files share one copy of the pixels; a gzip-compressed one is decompressed
// into Go memory (Unpack writes raw files that can be shared). Labels are
// copied into Go memory. Close the datasets to release the mappings.
//
// Errors are those of Load: a *NotInstalledError for missing files, an error
// naming the file for bad content.
func LoadBytes(name, dir string) (train, test *ByteSamples, err error) {
	spec, paths, err := findIDXFiles(name, dir)
	if err != nil {
		return nil, nil, err
	}
	if train, err = loadSplitBytes(spec, paths[0], paths[1]); err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", name, err)
	}
	if test, err = loadSplitBytes(spec, paths[2], paths[3]); err != nil {
		train.Close()
		return nil, nil, fmt.Errorf("load %s: %w", name, err)
	}
	return train, test, nil
}

// loadSplitBytes reads one split and checks that its images have the
// dataset's shape.
func loadSplitBytes(spec idxDataset, imagesPath, labelsPath string) (*ByteSamples, error) {
	d, err := LoadIDXPairBytes(imagesPath, labelsPath, spec.classes)
	if err != nil {
		return nil, err
	}
	if want := []int{spec.rows * spec.cols}; !slices.Equal(d.SampleShape(), want) {
		d.Close()
		return nil, fmt.Errorf("read %s: %w: images are %d values each, want %dx%d",
			imagesPath, ErrBadIDX, d.SampleSize(), spec.rows, spec.cols)
	}
	return d, nil
}

// LoadIDXPairBytes is LoadIDXPair keeping the pixels as bytes: it returns a
// ByteSamples of flattened samples, shape [rows*cols], with values b/255. A
// raw images file is memory-mapped read-only (see LoadBytes), a gzip one
// read into memory. It makes the checks of LoadIDXPair; errors name the
// file at fault.
func LoadIDXPairBytes(imagesPath, labelsPath string, classes int) (*ByteSamples, error) {
	images, m, err := mapIDXFile(imagesPath, 3, "images")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*ByteSamples, error) {
		if m != nil {
			m.close()
		}
		return nil, err
	}
	labels, err := readIDXFile(labelsPath, 1, "labels")
	if err != nil {
		return fail(err)
	}
	y, err := idxLabels(images, labels, imagesPath, labelsPath, classes)
	if err != nil {
		return fail(err)
	}
	d, err := NewByteSamples(images.Data, y, []int{images.Dims[1] * images.Dims[2]}, classes)
	if err != nil {
		return fail(err)
	}
	d.m = m
	return d, nil
}

// mapIDXFile returns the IDX array in path and the mapping its data lives
// in: a raw file is mapped, a gzip one read into Go memory (nil mapping).
// It checks the number of dimensions and that the file holds exactly the
// bytes its header declares.
func mapIDXFile(path string, ndims int, what string) (*IDX, *mapping, error) {
	m, err := mapFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	if isGzip(m.data) {
		m.close()
		a, err := readIDXFile(path, ndims, what)
		return a, nil, err
	}
	a, err := parseRawIDX(m.data)
	if err == nil {
		err = checkDims(a, ndims, what)
	}
	if err != nil {
		m.close()
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	return a, m, nil
}

// parseRawIDX reads the header of an uncompressed IDX array held whole in
// data and returns the array with Data pointing into data.
func parseRawIDX(data []byte) (*IDX, error) {
	r := bytes.NewReader(data)
	dims, size, err := readIDXHeader(r)
	if err != nil {
		return nil, err
	}
	start := len(data) - r.Len()
	switch have := len(data) - start; {
	case have < size:
		return nil, errIDXTruncated(size, dims, have, io.ErrUnexpectedEOF)
	case have > size:
		return nil, errIDXTrailing(size, dims)
	}
	return &IDX{Dims: dims, Data: data[start : start+size : start+size]}, nil
}
