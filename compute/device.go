package compute

import (
	"errors"
	"fmt"
)

// DeviceRows is offered by device engines that can keep a dataset's
// samples in device memory and gather each batch there by index
// (compute/cuda), so that a step copies indices instead of samples.
type DeviceRows interface {
	// UploadRows copies rows of cols values to the device: x (floats), or
	// b (bytes) whose values are table[byte]. An upload of the same arrays
	// again returns the rows already there.
	UploadRows(x []float32, b []byte, table *[256]float32, cols int) (ResidentRows, error)
	// GatherResident writes rows idx of r into dst (len(idx) rows of r's
	// cols); an index of -1 gives a row of zeros. It can be recorded in a
	// graph: idx is read on the device when the step runs.
	GatherResident(dst Tensor, r ResidentRows, idx Labels)
}

// ResidentRows are a dataset's rows in device memory (DeviceRows).
type ResidentRows interface {
	// Rows and Cols are the array's shape; Bytes the device memory it takes.
	Rows() int
	Cols() int
	Bytes() int64
}

// ErrDeviceMemory is what a device engine's build-time allocations give when
// the device has no room left: wrapped in the error of a build that returns
// one (a fused model's), and in the *DeviceMemoryError that Alloc, which
// returns no error, panics with. RecoverDeviceMemory turns that panic into
// an error: ddp's New (the model's build) and Fit (the GPU step path's
// buffers) and models.NewSampler do.
var ErrDeviceMemory = errors.New("out of device memory")

// DeviceMemoryError is the panic value of a device engine's Alloc (or
// AllocLabels) that the device refused for lack of memory.
type DeviceMemoryError struct {
	Engine string // the engine's name
	Op     string // what allocated
	Bytes  int64  // what it asked for
	Err    error  // the device's error
}

func (e *DeviceMemoryError) Error() string {
	return fmt.Sprintf("%s: %s: %d bytes: %v: %v", e.Engine, e.Op, e.Bytes, ErrDeviceMemory, e.Err)
}

// Unwrap gives ErrDeviceMemory and the device's error.
func (e *DeviceMemoryError) Unwrap() []error { return []error{ErrDeviceMemory, e.Err} }

// RecoverDeviceMemory turns r, what a deferred recover() returned, into
// *err ("what: " and the *DeviceMemoryError) when it is a device engine's
// refusal to allocate for lack of memory; any other panic goes on. Use it
// where a build that allocates with Alloc returns an error:
//
//	defer func() { compute.RecoverDeviceMemory(recover(), &err, "build") }()
func RecoverDeviceMemory(r any, err *error, what string) {
	if r == nil {
		return
	}
	dm, ok := r.(*DeviceMemoryError)
	if !ok {
		panic(r)
	}
	*err = fmt.Errorf("%s: %w", what, dm)
}
