package ddp

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// TestDeviceGradBF16: gradients reduced in bf16 on the device step path of
// 3 PEs train like the fp32 reduction (the same test loss to 1e-2) without
// being it (the parameters differ), the sharded and the replicated update
// end on the same bits, and the replicas are identical.
func TestDeviceGradBF16(t *testing.T) {
	opts := zeroOptions()
	fp32 := worldFit(t, 3, opts)
	opts.GradDType = comm.BFloat16
	sharded := worldFit(t, 3, opts)
	opts.ReplicatedUpdate = true
	replicated := worldFit(t, 3, opts)
	require.Equal(t, "device-sharded", sharded[0].strategy)
	require.Equal(t, "device", replicated[0].strategy)
	differ := 0
	for i, v := range sharded[0].params {
		if math.Float32bits(v) != math.Float32bits(replicated[0].params[i]) {
			t.Fatalf("parameter %d: %v sharded, %v replicated (bf16 gradients)", i, v, replicated[0].params[i])
		}
		if v != fp32[0].params[i] {
			differ++
		}
	}
	require.Positive(t, differ, "bf16 gradients changed no parameter: the reduction did not round")
	for _, r := range append(sharded, replicated...) {
		require.True(t, r.res.Replicas.Identical, r.res.Replicas.String())
	}
	t.Logf("test loss fp32 %.5f, bf16 %.5f; %d of %d parameters differ", fp32[0].res.Test.Loss, sharded[0].res.Test.Loss, differ, len(fp32[0].params))
	require.InDelta(t, fp32[0].res.Test.Loss, sharded[0].res.Test.Loss, 1e-2)
}

// TestGradBF16NeedsDevicePath: bf16 gradients on a host path are refused
// at New with what to do.
func TestGradBF16NeedsDevicePath(t *testing.T) {
	b := cpuBackend(t)
	defer b.done()
	m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{8}, Classes: 4})
	require.NoError(t, err)
	o, err := optim.NewSGD(optim.SGDConfig{})
	require.NoError(t, err)
	opts := baseOptions()
	opts.GradDType = comm.BFloat16
	_, err = New(b.c, b.e, m, o, opts)
	require.ErrorContains(t, err, "gradients reduced in bf16 need the GPU step path")
	opts.GradDType = comm.Byte
	_, err = New(b.c, b.e, m, o, opts)
	require.ErrorContains(t, err, "only float32 and bfloat16")
}
