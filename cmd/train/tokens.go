package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
)

// chooseTokenData decides a language model's data in the launcher: the
// model's context and vocabulary, and a text corpus (a file or directory,
// Go's source tree by default) or llm.c token shards, checked here so that a
// bad path, shard header or token is one line before any PE starts.
func chooseTokenData(o *options) (dataChoice, error) {
	m, err := models.New(o.model, o.modelConfig())
	if err != nil {
		return dataChoice{}, usageError{err}
	}
	spec := m.Data()
	dc := dataChoice{name: o.dataset, context: spec.Input[0], vocab: spec.Classes}
	switch o.dataset {
	case "text":
		if o.set("train-shards") || o.set("val-shards") {
			return dataChoice{}, usagef("--train-shards and --val-shards go with --dataset llmc")
		}
		if dc.vocab < 256 {
			return dataChoice{}, usagef("--dataset text is byte-level (256 tokens) but model %s has a vocabulary of %d", o.model, dc.vocab)
		}
		dc.dir = o.dataDir
		if dc.dir == "" {
			d, err := datasets.DefaultTextDir()
			if err != nil {
				return dataChoice{}, usagef("--dataset text: %v", err)
			}
			dc.dir = d
		}
		if _, err := os.Stat(dc.dir); err != nil {
			return dataChoice{}, usagef("--data-dir %s: %v", dc.dir, err)
		}
		n, err := parseBytes("--corpus-max", o.corpusMax, true)
		if err != nil {
			return dataChoice{}, err
		}
		dc.maxBytes = n
	case "llmc":
		if o.trainShards == "" || o.valShards == "" {
			return dataChoice{}, usagef("--dataset llmc needs --train-shards and --val-shards (globs of llm.c .bin token shards)")
		}
		dc.trainGlob, dc.valGlob = o.trainShards, o.valShards
		tr, va, err := datasets.LoadShards(dc.trainGlob, dc.valGlob, dc.context, dc.vocab)
		if err != nil {
			return dataChoice{}, usageError{err}
		}
		tr.Close()
		va.Close()
	default:
		return dataChoice{}, usagef("--dataset %s: model %s is a language model: use --dataset text or llmc", o.dataset, o.model)
	}
	return dc, nil
}

// loadTokenData loads a language model's training and validation windows on
// one PE. A text corpus is built once per job into the run directory by PE
// 0 and memory-mapped by every PE (shared pages); without a run directory
// (one PE, mpirun) the PE reads the text itself. Shards are memory-mapped.
func loadTokenData(dc dataChoice, sh dataShare) (train, val datasets.Source, err error) {
	opts := datasets.TextOptions{MaxBytes: dc.maxBytes}
	switch {
	case dc.name == "llmc":
		tr, va, err := datasets.LoadShards(dc.trainGlob, dc.valGlob, dc.context, dc.vocab)
		if err != nil {
			return nil, nil, err
		}
		return tr, va, nil
	case sh.runDir != "":
		path := filepath.Join(sh.runDir, datasets.CorpusFile)
		var berr error
		if sh.first {
			_, berr = datasets.BuildCorpus(path, dc.dir, opts)
		}
		if err := sh.barrier(); err != nil {
			return nil, nil, fmt.Errorf("wait for PE 0 to build the text corpus: %w", err)
		}
		if berr != nil {
			return nil, nil, berr
		}
		tr, va, err := datasets.LoadCorpus(path, dc.context)
		if err != nil {
			return nil, nil, err
		}
		return tr, va, nil
	}
	tr, va, err := datasets.LoadText(dc.dir, dc.context, opts)
	if err != nil {
		return nil, nil, err
	}
	return tr, va, nil
}
