package traincmd

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/datasets"
)

// dataChoice is the dataset a run will use, decided once (in the launcher)
// and passed to the PEs as flags, so that every PE loads the same thing.
type dataChoice struct {
	name   string            // fashion-mnist, mnist, synthetic, text, llmc or a registered dataset
	opts   map[string]string // a registered dataset's --data-opt
	loader datasets.Loader   // a registered dataset's (nil: a built-in one)
	dir    string            // IDX directory; text file or directory
	notice string            // a warning to print once (fallback to synthetic)

	// token data (vocab > 0)
	context, vocab     int    // the model's
	trainGlob, valGlob string // llmc
	maxBytes           int64  // text: corpus cap (0: all)
	tokenizer          string // text: byte or gpt2 (datasets.NewTokenizer)
	corpus             string // text: the corpus file built from dir (corpusFile)
}

// record is the data as a checkpoint's recipe keeps it ("data"): the
// dataset and where it comes from, with paths made absolute, so that a run
// resumed on other data (another --dataset, --data-dir, --corpus-max,
// --tokenizer or shards) is warned of it, as of any change of recipe. The
// checkpoint's position check alone misses data of another size whenever
// the step falls in the first epoch of both.
func (dc dataChoice) record() string {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	var b strings.Builder
	b.WriteString(dc.name)
	switch {
	case dc.trainGlob != "":
		fmt.Fprintf(&b, " train %s val %s", abs(dc.trainGlob), abs(dc.valGlob))
	case dc.dir != "":
		fmt.Fprintf(&b, " %s", abs(dc.dir))
	}
	if dc.tokenizer != "" {
		fmt.Fprintf(&b, " %s tokens", dc.tokenizer)
	}
	if dc.maxBytes > 0 {
		fmt.Fprintf(&b, " first %d bytes", dc.maxBytes)
	}
	for _, k := range slices.Sorted(maps.Keys(dc.opts)) {
		fmt.Fprintf(&b, " %s=%s", k, dc.opts[k])
	}
	return b.String()
}

// defaultDataDir is where a dataset is installed (a variable for tests).
var defaultDataDir = datasets.DefaultDir

// chooseData decides which dataset to use. A missing Fashion-MNIST falls
// back to synthetic data with a notice when the user did not ask for it
// explicitly; an explicit --dataset or --data-dir without the files is a
// usage error that says how to get them.
func chooseData(o *options) (dataChoice, error) {
	if l, ok := datasets.Registered(o.dataset); ok {
		return chooseRegistered(o, l)
	}
	if o.languageModel {
		return chooseTokenData(o)
	}
	switch o.dataset {
	case "synthetic":
		return dataChoice{name: "synthetic"}, nil
	case "text", "llmc":
		return dataChoice{}, usagef("--dataset %s is token data for a language model (--model gpt-tiny, gpt2, llama-tiny, ...: --list-models); model %s is a classifier", o.dataset, o.model)
	}
	dir := o.dataDir
	if dir == "" {
		d, err := defaultDataDir(o.dataset)
		if err != nil {
			return dataChoice{}, inputf("--dataset %s: %v", o.dataset, err)
		}
		dir = d
	}
	err := datasets.CheckInstalled(o.dataset, dir)
	if err == nil {
		return dataChoice{name: o.dataset, dir: dir}, nil
	}
	var ni *datasets.NotInstalledError
	if !errors.As(err, &ni) {
		return dataChoice{}, inputf("dataset %s in %s: %w", o.dataset, dir, err)
	}
	if o.set("dataset") || o.set("data-dir") {
		return dataChoice{}, inputf("%v; %s", err, ni.Hint())
	}
	return dataChoice{name: "synthetic", notice: fmt.Sprintf(
		"%v; %s. Training on synthetic data instead (--dataset synthetic to silence this).", err, ni.Hint())}, nil
}

// chooseRegistered checks a dataset the program registered: the launcher
// loads it once, so that a bad --data-dir or --data-opt is one line before
// any PE starts, and the model is sized from its samples (o.dataSpec).
func chooseRegistered(o *options, l datasets.Loader) (dataChoice, error) {
	dc := dataChoice{name: o.dataset, dir: o.dataDir, opts: o.dataOpts, loader: l}
	if proc.Role == launch.LocalPE {
		return dc, nil // the launcher loaded it
	}
	tr, te, err := l(datasets.LoadConfig{Dir: o.dataDir, Seed: o.seed, Options: o.dataOpts})
	if err != nil {
		return dataChoice{}, inputf("--dataset %s: %v", o.dataset, err)
	}
	spec := tr.Spec()
	switch {
	case te == nil:
		return dataChoice{}, usagef("--dataset %s: its loader returned no test samples", o.dataset)
	case spec.Tokens && !o.languageModel:
		return dataChoice{}, usagef("--dataset %s holds token windows; model %s is a classifier", o.dataset, o.model)
	case !spec.Tokens && o.languageModel:
		return dataChoice{}, usagef("--dataset %s holds float samples; model %s is a language model (it reads tokens)", o.dataset, o.model)
	}
	o.dataSpec = &spec
	return dc, nil
}

// dataShare is how a PE may share the training data with the other PEs of
// its host.
type dataShare struct {
	runDir  string       // the job's run directory ($SYMDDP_RUN_DIR); "" when there is none
	first   bool         // this PE unpacks the data (PE 0)
	barrier func() error // waits for every PE of the job (collective)
	warn    func(string) // prints a warning once per job
}

// loadData loads the chosen dataset, normalised, on one PE.
//
// Fashion-MNIST and MNIST keep their pixels as bytes, standardised as they
// are gathered into a batch (datasets.ByteSamples): a quarter of the memory
// of float32, and the same values. With a run directory (PEs started by the
// launcher), PE 0 unpacks gzip-compressed files into it once and every PE
// maps the raw files read-only, so the PEs of a host share one copy of the
// pixels. Without one (--pes 1, mpirun), the PE unpacks into a temporary
// directory that it removes once the files are mapped. Unpacking only saves
// memory: when it fails, the PE reads the files into its own memory.
// Synthetic data is float32 in each PE's memory. Load-time garbage is
// returned to the operating system.
func loadData(dc dataChoice, seed uint64, limit int, sh dataShare) (train, test datasets.Source, err error) {
	defer debug.FreeOSMemory()
	if dc.loader != nil {
		tr, te, err := dc.loader(datasets.LoadConfig{Dir: dc.dir, Seed: seed, Options: dc.opts})
		if err != nil {
			return nil, nil, fmt.Errorf("dataset %s: %w", dc.name, err)
		}
		return tr, te, nil
	}
	if dc.vocab > 0 { // a language model's tokens
		return loadTokenData(dc, seed)
	}
	switch dc.name {
	case "synthetic":
		tr, te, err := datasets.SyntheticSplit(60000, 10000, 784, 10, seed)
		if err != nil {
			return nil, nil, fmt.Errorf("synthetic data: %w", err)
		}
		if limit > 0 {
			tr = tr.Subset(limit)
		}
		return tr, te, nil
	}
	mean, std, err := datasets.PixelStats(dc.name)
	if err != nil {
		return nil, nil, err
	}
	dir, cleanup, err := unpackedDir(dc, sh)
	if err != nil {
		return nil, nil, err
	}
	tr, te, err := datasets.LoadBytes(dc.name, dir)
	cleanup() // the mappings outlive the files
	if err != nil && dir != dc.dir {
		// the error names the unpacked copy, which is gone or private:
		// read the user's own files again, so that it names them
		if _, _, err2 := datasets.LoadBytes(dc.name, dc.dir); err2 != nil {
			err = err2
		}
	}
	if err != nil {
		return nil, nil, err
	}
	tr.Normalize(mean, std)
	te.Normalize(mean, std)
	if limit > 0 {
		tr = tr.Subset(limit)
	}
	return tr, te, nil
}

// unpackedDir returns the directory to load dc from: raw files to map when
// they could be made, dc.dir otherwise, and what removes a private
// directory once it is loaded. With a run directory it is collective (PE 0
// unpacks, then every PE passes a barrier).
func unpackedDir(dc dataChoice, sh dataShare) (dir string, cleanup func(), err error) {
	cleanup = func() {}
	if sh.runDir == "" {
		tmp, err := os.MkdirTemp("", "symddp-data-")
		if err != nil {
			return dc.dir, cleanup, nil
		}
		cleanup = func() { os.RemoveAll(tmp) }
		if dir, err = datasets.Unpack(dc.name, dc.dir, tmp); err != nil {
			return dc.dir, cleanup, nil // LoadBytes reports bad content
		}
		return dir, cleanup, nil
	}
	shared := filepath.Join(sh.runDir, "data-"+dc.name)
	if sh.first {
		_, err := datasets.Unpack(dc.name, dc.dir, shared)
		if err != nil && !errors.Is(err, datasets.ErrBadIDX) && sh.warn != nil {
			sh.warn(fmt.Sprintf("could not share the %s files among the PEs (%v); every PE reads its own copy", dc.name, err))
		}
	}
	if err := sh.barrier(); err != nil {
		return "", cleanup, fmt.Errorf("wait for PE 0 to unpack %s: %w", dc.name, err)
	}
	if datasets.CheckInstalled(dc.name, shared) == nil {
		return shared, cleanup, nil
	}
	return dc.dir, cleanup, nil // the files were raw already, or unpacking failed
}
