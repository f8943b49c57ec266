package cudalib

import (
	"errors"
	"testing"
)

// What a host emulation does not define answers ErrNotEmulated, naming the
// entry point; a result besides the error is its zero.
func TestUnemulated(t *testing.T) {
	err := UnemulatedDevice{}.Zero(1, 4)
	if !errors.Is(err, ErrNotEmulated) || err.Error() != "sdc_zero: not emulated on the host" {
		t.Errorf("UnemulatedDevice.Zero: %v", err)
	}
	if p, err := (UnemulatedDevice{}).DevAlloc(64); p != 0 || !errors.Is(err, ErrNotEmulated) {
		t.Errorf("UnemulatedDevice.DevAlloc: %#x, %v", p, err)
	}
	if n, err := (UnemulatedDevice{}).AttentionBackwardBF16ScratchBytes(AttentionAuto, 1, 64, 64, 1); n != 0 || !errors.Is(err, ErrNotEmulated) {
		t.Errorf("UnemulatedDevice.AttentionBackwardBF16ScratchBytes: %d, %v", n, err)
	}
}
