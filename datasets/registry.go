package datasets

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// LoadConfig is what a registered dataset is loaded with: the command
// line's settings of the run.
type LoadConfig struct {
	// Dir is --data-dir ("" when not given).
	Dir string
	// Seed is the run's seed: data a loader makes up must follow it, so
	// that every PE loads the same samples.
	Seed uint64
	// Options are free-form key=value settings (train's --data-opt).
	Options map[string]string
}

// Loader loads a registered dataset: its training and test (or
// validation) samples. It runs in every PE, and once in the launcher
// before any PE starts (so that a bad path or option is one line there),
// and must return the same samples in each.
type Loader func(cfg LoadConfig) (train, test Source, err error)

var registry = struct {
	sync.Mutex
	m map[string]Loader
}{m: map[string]Loader{}}

// builtin are the datasets the train command knows without registration.
var builtin = []string{"fashion-mnist", "mnist", "synthetic", "text", "llmc"}

// Register makes a dataset available to train's --dataset under name. It
// panics when name is empty, one of the built-in datasets (fashion-mnist,
// mnist, synthetic, text, llmc) or already registered, or l is nil; call it
// from an init function or from main before traincmd.Main.
func Register(name string, l Loader) {
	if name == "" || l == nil {
		panic("datasets: Register with an empty name or a nil loader")
	}
	if slices.Contains(builtin, name) {
		panic(fmt.Sprintf("datasets: %q is a built-in dataset", name))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[name]; dup {
		panic(fmt.Sprintf("datasets: dataset %q registered twice", name))
	}
	registry.m[name] = l
}

// Registered returns the loader registered under name.
func Registered(name string) (Loader, bool) {
	registry.Lock()
	defer registry.Unlock()
	l, ok := registry.m[name]
	return l, ok
}

// RegisteredNames lists the registered datasets, sorted.
func RegisteredNames() []string {
	registry.Lock()
	defer registry.Unlock()
	return slices.Sorted(maps.Keys(registry.m))
}
