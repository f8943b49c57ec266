package traincmd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/symddp/symddp/ddp"
)

// The summary's line on the host's waits names the side that bounds the
// steps, and is left out where the host never waited.
func TestDeviceWaitLine(t *testing.T) {
	assert.Empty(t, deviceWaitLine(ddp.Result{Elapsed: time.Second}))
	assert.Equal(t, "host waited for the GPU 75% of the run (1.50s): the GPU bounds the steps",
		deviceWaitLine(ddp.Result{Elapsed: 2 * time.Second, DeviceWait: 1500 * time.Millisecond}))
	assert.Equal(t, "host waited for the GPU 5% of the run (0.10s): the host bounds the steps: its data pipeline and launches take about as long as the GPU's step",
		deviceWaitLine(ddp.Result{Elapsed: 2 * time.Second, DeviceWait: 100 * time.Millisecond}))
}
