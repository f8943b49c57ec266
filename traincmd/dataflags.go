package traincmd

import "github.com/symddp/symddp/datasets"

// dataFlagUses says which datasets read each flag that says where a run's
// data comes from or how much of it to use: setting one the dataset does
// not read is a usage error rather than silently ignored.
var dataFlagUses = []struct {
	flag, datasets string
}{
	{"data-dir", "--dataset fashion-mnist, mnist, text and datasets a program registers"},
	{"corpus-max", "--dataset text"},
	{"tokenizer", "--dataset text"},
	{"train-shards", "--dataset llmc"},
	{"val-shards", "--dataset llmc"},
	{"train-limit", "--dataset fashion-mnist, mnist and synthetic of a classifier"},
	{"data-opt", "datasets a program registers (datasets.Register, docs/LIBRARY.md)"},
}

// dataReads is what the run's dataset reads: the flags of dataFlagUses it
// takes, and what it is, in words. ok is false for a dataset the model
// cannot take, which chooseData reports.
func (o *options) dataReads() (flags []string, what string, ok bool) {
	if _, registered := datasets.Registered(o.dataset); registered {
		return []string{"data-dir", "data-opt"}, "which its program loads with --data-dir and --data-opt", true
	}
	switch {
	case o.languageModel && o.dataset == "text":
		return []string{"data-dir", "corpus-max", "tokenizer"}, "which reads --data-dir with --corpus-max and --tokenizer", true
	case o.languageModel && o.dataset == "llmc":
		return []string{"train-shards", "val-shards"}, "which reads the token shards of --train-shards and --val-shards", true
	case o.languageModel && o.dataset == "synthetic":
		return nil, "which makes its tokens", true
	case !o.languageModel && o.dataset == "synthetic":
		return []string{"train-limit"}, "which makes its samples (--train-limit takes the first N)", true
	case !o.languageModel && (o.dataset == "fashion-mnist" || o.dataset == "mnist"):
		return []string{"data-dir", "train-limit"}, "which reads its IDX files from --data-dir (--train-limit takes the first N)", true
	}
	return nil, "", false
}

// checkDataFlags refuses a flag of dataFlagUses that the run's dataset
// does not read.
func (o *options) checkDataFlags() error {
	reads, what, ok := o.dataReads()
	if !ok {
		return nil
	}
	for _, u := range dataFlagUses {
		if !o.set(u.flag) || contains(reads, u.flag) {
			continue
		}
		which := "--dataset " + o.dataset
		if u.flag == "data-opt" {
			which = "the built-in " + which
		}
		return usagef("--%s applies to %s, not to %s, %s", u.flag, u.datasets, which, what)
	}
	return nil
}
