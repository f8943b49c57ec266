package cudalib

import (
	"errors"
	"fmt"
)

// Sentinel errors. An *Error from a library call matches the one of its
// status code; Load's errors wrap ErrUnavailable (and ErrNotFound or
// ErrNoDevice).
var (
	ErrUnavailable = errors.New("cudalib: GPU library not available")
	ErrNotFound    = errors.New("cudalib: GPU library not found")
	ErrNoDevice    = errors.New("cudalib: no usable GPU")
	ErrTimeout     = errors.New("cudalib: wait passed its deadline")
	ErrNoMemory    = errors.New("cudalib: out of memory")
	ErrArgument    = errors.New("cudalib: bad argument")
	ErrState       = errors.New("cudalib: runtime in the wrong state")
	ErrDesync      = errors.New("cudalib: PEs met in different collectives")
)

// Status codes of the C ABI (SD_OK, SD_ERR_*).
const (
	statusOK       = 0
	statusErr      = 1
	statusNoDevice = 2
	statusTimeout  = 3
	statusNoMemory = 4
	statusArg      = 5
	statusState    = 6
	statusDesync   = 7
)

// Error is a failed library call: the entry point, its status code and the
// library's message.
type Error struct {
	Call   string
	Status int
	Msg    string
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("%s: status %d", e.Call, e.Status)
	}
	return fmt.Sprintf("%s: %s", e.Call, e.Msg)
}

// Unwrap gives the sentinel of the status code (nil for a plain failure).
func (e *Error) Unwrap() error {
	switch e.Status {
	case statusNoDevice:
		return ErrNoDevice
	case statusTimeout:
		return ErrTimeout
	case statusNoMemory:
		return ErrNoMemory
	case statusArg:
		return ErrArgument
	case statusState:
		return ErrState
	case statusDesync:
		return ErrDesync
	}
	return nil
}

// callError is nil for statusOK and an *Error otherwise.
func callError(call string, status int, msg string) error {
	if status == statusOK {
		return nil
	}
	return &Error{Call: call, Status: status, Msg: msg}
}
