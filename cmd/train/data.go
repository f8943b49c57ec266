package main

import (
	"errors"
	"fmt"

	"github.com/symddp/symddp/datasets"
)

// dataChoice is the dataset a run will use, decided once (in the launcher)
// and passed to the PEs as flags, so that every PE loads the same thing.
type dataChoice struct {
	name   string // fashion-mnist, mnist or synthetic
	dir    string
	notice string // a warning to print once (fallback to synthetic)
}

// defaultDataDir is where a dataset is installed (a variable for tests).
var defaultDataDir = datasets.DefaultDir

// chooseData decides which dataset to use. A missing Fashion-MNIST falls
// back to synthetic data with a notice when the user did not ask for it
// explicitly; an explicit --dataset or --data-dir without the files is a
// usage error that says how to get them.
func chooseData(o *options) (dataChoice, error) {
	if o.dataset == "synthetic" {
		return dataChoice{name: "synthetic"}, nil
	}
	dir := o.dataDir
	if dir == "" {
		d, err := defaultDataDir(o.dataset)
		if err != nil {
			return dataChoice{}, usagef("--dataset %s: %v", o.dataset, err)
		}
		dir = d
	}
	err := datasets.CheckInstalled(o.dataset, dir)
	if err == nil {
		return dataChoice{name: o.dataset, dir: dir}, nil
	}
	var ni *datasets.NotInstalledError
	if !errors.As(err, &ni) {
		return dataChoice{}, fmt.Errorf("dataset %s in %s: %w", o.dataset, dir, err)
	}
	if o.set("dataset") || o.set("data-dir") {
		return dataChoice{}, usagef("%v; %s", err, ni.Hint())
	}
	return dataChoice{name: "synthetic", notice: fmt.Sprintf(
		"%v; %s. Training on synthetic data instead (--dataset synthetic to silence this).", err, ni.Hint())}, nil
}

// loadData loads the chosen dataset, normalised, on one PE.
func loadData(dc dataChoice, seed uint64, limit int) (train, test *datasets.InMemory, err error) {
	if dc.name == "synthetic" {
		train, test, err = datasets.SyntheticSplit(60000, 10000, 784, 10, seed)
		if err != nil {
			return nil, nil, fmt.Errorf("synthetic data: %w", err)
		}
	} else {
		train, test, err = datasets.Load(dc.name, dc.dir)
		if err != nil {
			return nil, nil, err
		}
		mean, std, err := datasets.PixelStats(dc.name)
		if err != nil {
			return nil, nil, err
		}
		train.Normalize(mean, std)
		test.Normalize(mean, std)
	}
	if limit > 0 && limit < train.Len() {
		train = train.Subset(limit)
	}
	return train, test, nil
}
