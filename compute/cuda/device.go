package cuda

import "github.com/symddp/symddp/internal/cudalib"

// device is what the engine needs of a compute context: one method per C
// entry point of cuda/symddp_compute.h, generated into cudalib.Device from
// the header. *cudalib.Context is the real one; tests may stand in a host
// implementation.
type device = cudalib.Device
