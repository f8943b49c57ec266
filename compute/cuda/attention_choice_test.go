package cuda

import (
	"testing"

	"github.com/symddp/symddp/internal/cudalib"
)

// cudnnKernels answers only the question cudnnAttention asks: whether the
// library's cuDNN plans build at a shape.
type cudnnKernels struct {
	cudalib.GPTKernels
	supported bool
	asked     [4]int
}

func (k *cudnnKernels) AttentionCUDNNSupported(b, t, c, nh int) bool {
	k.asked = [4]int{b, t, c, nh}
	return k.supported
}

// The description follows the library's rule (cuda/sd_gpt.cuh): cuDNN's
// attention where its plans build, unless SYMDDP_ATTENTION asks for ours.
func TestCUDNNAttentionFollowsTheLibrarysRule(t *testing.T) {
	for _, tc := range []struct {
		env       string
		supported bool
		want      bool
	}{
		{"", true, true}, {"auto", true, true}, {"cudnn", true, true},
		{"", false, false}, {"cudnn", false, false},
		{"own", true, false}, {"mma", true, false},
	} {
		t.Setenv("SYMDDP_ATTENTION", tc.env)
		k := &cudnnKernels{supported: tc.supported}
		if got := cudnnAttention(k, 16, 1024, 768, 12); got != tc.want {
			t.Errorf("SYMDDP_ATTENTION=%q, plans build %v: cudnnAttention %v, want %v", tc.env, tc.supported, got, tc.want)
		}
		if tc.want && k.asked != [4]int{16, 1024, 768, 12} {
			t.Errorf("SYMDDP_ATTENTION=%q: asked about %v, want the step's shape", tc.env, k.asked)
		}
	}
}
