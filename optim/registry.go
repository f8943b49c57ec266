package optim

import (
	"fmt"
	"slices"
	"strings"
)

// optimizer is a registry entry: PyTorch's defaults and a constructor.
type optimizer struct {
	defaults Config
	build    func(Config) (Optimizer, error)
}

// registry maps names to optimizers.
var registry = map[string]optimizer{
	"sgd": {Config{}, func(c Config) (Optimizer, error) {
		o, err := NewSGD(SGDConfig{Momentum: c.Momentum, Nesterov: c.Nesterov, WeightDecay: c.WeightDecay})
		if err != nil {
			return nil, err
		}
		return o, nil
	}},
	"adam": {adamConfig(DefaultAdamConfig()), func(c Config) (Optimizer, error) {
		o, err := NewAdam(AdamConfig{Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay})
		if err != nil {
			return nil, err
		}
		return o, nil
	}},
	"adamw": {adamConfig(AdamConfig(DefaultAdamWConfig())), func(c Config) (Optimizer, error) {
		o, err := NewAdamW(AdamWConfig{Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay})
		if err != nil {
			return nil, err
		}
		return o, nil
	}},
}

// adamConfig flattens an AdamConfig.
func adamConfig(c AdamConfig) Config {
	return Config{Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay}
}

// New returns the optimizer called name ("sgd", "adam", "adamw") configured
// from the fields of c it uses; it ignores the others. It reports an unknown
// name, listing the known ones, and invalid hyperparameters.
func New(name string, c Config) (Optimizer, error) {
	o, ok := registry[name]
	if !ok {
		return nil, unknownOptimizer(name)
	}
	return o.build(c)
}

// DefaultConfig returns PyTorch's default hyperparameters for the optimizer
// called name: a command line starts from them and overrides what the user
// set.
func DefaultConfig(name string) (Config, error) {
	o, ok := registry[name]
	if !ok {
		return Config{}, unknownOptimizer(name)
	}
	return o.defaults, nil
}

// Names returns the registered optimizer names, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// unknownOptimizer is the error for a name that is not registered.
func unknownOptimizer(name string) error {
	return fmt.Errorf("optim: unknown optimizer %q (known: %s)", name, strings.Join(Names(), ", "))
}
