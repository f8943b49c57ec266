package cuda_test

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/models"
)

// One bf16 forward and backward of a 2-layer GPT on the emulated device:
// the whole gradient arena's FNV-1a hash, recorded from the fused GPT
// (compute/cuda/gpt.go at commit 7271189) before per-layer bf16 plans
// replaced it. The plans enqueue the same kernels in the same order with
// the same arguments: the same bits.
func TestBF16GPTGradientBitsEmulated(t *testing.T) {
	cfg := models.GPTConfig{Layers: 2, Heads: 2, Width: 64, Context: 64, Vocab: 256}
	g, m := gptGradients(t, cudatest.NewEmulated(cuda.Options{}), cfg, 2)
	require.Equal(t, compute.PrecisionBF16, m.Precision())
	h := fnv.New64a()
	for _, v := range g {
		_ = binary.Write(h, binary.LittleEndian, math.Float32bits(v))
	}
	const want = 0x41f508b673e0b9b9
	require.Equal(t, uint64(want), h.Sum64(), "gradient hash %016x, want %016x", h.Sum64(), uint64(want))
}
