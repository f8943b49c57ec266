package cudalib

import (
	"errors"
	"fmt"
)

// ErrNotEmulated is the error of an entry point that a host emulation of
// the library (compute/cuda/cudatest) does not emulate: UnemulatedDevice,
// which it embeds, answers with it.
var ErrNotEmulated = errors.New("not emulated on the host")

func notEmulated(entry string) error { return fmt.Errorf("%s: %w", entry, ErrNotEmulated) }
