package cudalib

import (
	"errors"
	"testing"
)

func TestErrorWrapsStatusSentinel(t *testing.T) {
	for _, c := range []struct {
		status int
		want   error
	}{
		{statusNoDevice, ErrNoDevice},
		{statusTimeout, ErrTimeout},
		{statusNoMemory, ErrNoMemory},
		{statusArg, ErrArgument},
		{statusState, ErrState},
		{statusDesync, ErrDesync},
	} {
		err := callError("sd_x", c.status, "sd_x.cu:1: boom")
		if !errors.Is(err, c.want) {
			t.Errorf("status %d: %v does not wrap %v", c.status, err, c.want)
		}
		if err.Error() != "sd_x: sd_x.cu:1: boom" {
			t.Errorf("status %d: message %q", c.status, err.Error())
		}
	}
	if err := callError("sd_x", statusErr, ""); errors.Unwrap(err) != nil || err.Error() != "sd_x: status 1" {
		t.Errorf("plain failure: %v (unwraps to %v)", err, errors.Unwrap(err))
	}
	if err := callError("sd_x", statusOK, "ignored"); err != nil {
		t.Errorf("status 0 gave %v", err)
	}
}

func TestDTypeSize(t *testing.T) {
	if Float32.Size() != 4 || BFloat16.Size() != 2 || DType(9).Size() != 0 {
		t.Fatalf("sizes %d %d %d", Float32.Size(), BFloat16.Size(), DType(9).Size())
	}
}
