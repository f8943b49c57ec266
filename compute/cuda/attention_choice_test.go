package cuda

import (
	"testing"

	"github.com/symddp/symddp/internal/cudalib"
)

// cudnnDevice answers only the question cudnnAttention asks: whether the
// library's cuDNN plans build at a shape.
type cudnnDevice struct {
	supported bool
	asked     [4]int
	impl      cudalib.AttentionImpl
}

func (d *cudnnDevice) AttentionBF16Supported(impl cudalib.AttentionImpl, b, t, c, nh int) (bool, error) {
	d.impl, d.asked = impl, [4]int{b, t, c, nh}
	return d.supported, nil
}

// The description follows the library's rule (SDC_ATTN_AUTO in
// cuda/symddp_compute.h): cuDNN's attention where its plans build, unless
// SYMDDP_ATTENTION asks for ours.
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
		d := &cudnnDevice{supported: tc.supported}
		got, err := cudnnAttention(d, 16, 1024, 768, 12)
		if err != nil || got != tc.want {
			t.Errorf("SYMDDP_ATTENTION=%q, plans build %v: cudnnAttention %v, %v; want %v", tc.env, tc.supported, got, err, tc.want)
		}
		if tc.want && (d.asked != [4]int{16, 1024, 768, 12} || d.impl != cudalib.AttentionCUDNN) {
			t.Errorf("SYMDDP_ATTENTION=%q: asked about %v of %v, want the step's shape of cuDNN's", tc.env, d.asked, d.impl)
		}
	}
}
