package cudalib

import (
	"errors"
	"fmt"
)

// ErrNotEmulated is the error of an entry point that a host emulation of
// the library (compute/cuda/cudatest) does not emulate: UnemulatedDevice and
// UnemulatedGPT, which it embeds, answer with it.
var ErrNotEmulated = errors.New("not emulated on the host")

func notEmulated(entry string) error { return fmt.Errorf("%s: %w", entry, ErrNotEmulated) }
