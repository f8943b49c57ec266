package traincmd

import (
	"strings"
	"testing"
)

// TestHelpEnv: --help-env lists the environment variables and exits 0
// before any PE starts.
func TestHelpEnv(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run([]string{"--help-env"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--help-env: exit %d, stderr %q", code, stderr.String())
	}
	for _, want := range []string{"SYMDDP_PE ", "SYMDDP_DESYNC_CHECK ", "SYMDDP_ONE_SHOT_MAX ", "Read by the CUDA library"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--help-env output (stdout) lacks %q:\n%s", want, stdout.String())
		}
	}
}
