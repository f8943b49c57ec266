package optim

import (
	"fmt"
	"math"
)

// nonNegative reports an error unless x is finite and ≥ 0.
func nonNegative(opt, field string, x float32) error {
	if !(x >= 0) || math.IsInf(float64(x), 1) {
		return fmt.Errorf("optim: %s: %s must be a finite number >= 0, got %g", opt, field, x)
	}
	return nil
}

// positive reports an error unless x is finite and > 0.
func positive(opt, field string, x float32) error {
	if !(x > 0) || math.IsInf(float64(x), 1) {
		return fmt.Errorf("optim: %s: %s must be a finite number > 0, got %g", opt, field, x)
	}
	return nil
}

// beta reports an error unless x is in [0, 1).
func beta(opt, field string, x float32) error {
	if !(x >= 0 && x < 1) {
		return fmt.Errorf("optim: %s: %s must be in [0, 1), got %g", opt, field, x)
	}
	return nil
}

// firstErr returns the first non-nil error, so that a user sees one line.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
