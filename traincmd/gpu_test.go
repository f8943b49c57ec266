package traincmd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/symddp/symddp/internal/settings"
)

// An explicit --bucket-size on PEs that share a GPU under MPS gets a
// warning naming the size, the PEs per GPU and the way out; the GPU's
// default (auto), 0 and one PE per GPU get none.
func TestMPSBucketWarning(t *testing.T) {
	for _, tc := range []struct {
		bucket string
		perGPU int
		warn   bool
	}{
		{"64KiB", 8, true}, {"1MiB", 2, true},
		{"auto", 8, false}, {"0", 8, false}, {"64KiB", 1, false}, {"nonsense", 8, false},
	} {
		got := mpsBucketWarning(&options{bucketSize: tc.bucket}, tc.perGPU)
		if !tc.warn {
			if got != "" {
				t.Errorf("--bucket-size %s, %d PEs a GPU: %q, want no warning", tc.bucket, tc.perGPU, got)
			}
			continue
		}
		for _, want := range []string{"warning: --bucket-size " + tc.bucket + " ", "sharing each GPU under MPS", "docs/GPU.md", "--bucket-size 0, the default",
			"one-block thread-block clusters", settings.CUDANoCluster + "=0"} {
			if !strings.Contains(got, want) {
				t.Errorf("--bucket-size %s, %d PEs a GPU: %q lacks %q", tc.bucket, tc.perGPU, got, want)
			}
		}
		if !strings.Contains(got, fmt.Sprintf(" %d PEs", tc.perGPU)) {
			t.Errorf("--bucket-size %s: %q does not say %d PEs", tc.bucket, got, tc.perGPU)
		}
	}
}
