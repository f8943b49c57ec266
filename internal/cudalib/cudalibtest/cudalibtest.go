// Package cudalibtest builds a fake libsymddp_cuda.so for tests on machines
// without a GPU: a C stand-in (internal/cudalib/testdata) that implements the
// library's whole C ABI for a job of one PE in host memory, so that the
// loader and the Go side of the GPU backend run for real without CUDA.
package cudalibtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/symddp/symddp/internal/cudalib"
)

// BuildFake compiles the fake library into a fresh temporary directory and
// returns its path; every call gives a separate copy with its own state. The
// test is skipped (one line) when there is no C compiler or no cgo. The fake
// implements the runtime (fake_symddp_cuda.c).
func BuildFake(tb testing.TB) string {
	tb.Helper()
	return build(tb, "fake_symddp_cuda.c")
}

// build compiles the sources of testdata into a fake library.
func build(tb testing.TB, sources ...string) string {
	tb.Helper()
	if !cudalib.Buildable() {
		tb.Skip("fake GPU library: built without cgo")
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		tb.Skipf("fake GPU library: no C compiler (%s): %v", cc, err)
	}
	root := moduleRoot()
	if root == "" {
		tb.Skip("fake GPU library: the module's sources are not here (run the test from inside the repository)")
	}
	include := filepath.Join(root, "cuda")
	out := filepath.Join(tb.TempDir(), "libsymddp_cuda.so")
	args := []string{"-shared", "-fPIC", "-O1", "-Wl,-Bsymbolic", "-I" + include}
	for _, s := range sources {
		args = append(args, filepath.Join(root, "internal", "cudalib", "testdata", s))
	}
	cmd := exec.Command(cc, append(args, "-lm", "-o", out)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("cudalibtest: build the fake library: %v\n%s", err, msg)
	}
	return out
}

// moduleRoot is the repository holding the fake's source: the one this file
// was compiled from if it is still there (go test), else the first directory
// with go.mod above the working directory (a test binary run elsewhere).
func moduleRoot() string {
	has := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "internal", "cudalib", "testdata", "fake_symddp_cuda.c"))
		return err == nil
	}
	if _, self, _, ok := runtime.Caller(0); ok {
		if dir := filepath.Join(filepath.Dir(self), "..", "..", ".."); has(dir) {
			return dir
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	if dir := cudalib.ModuleRoot(wd); dir != "" && has(dir) {
		return dir
	}
	return ""
}
