//go:build cgo

package cudalib_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/cudalib/cudalibtest"
)

// fakeLogCap is FAKE_SDG_LOG_CAP of testdata/fake_symddp_gpt.c: the fake
// treats a stream as a log of that many bytes.
const fakeLogCap = 4096

// openFakeGPT loads a fresh fake library and its GPT kernels.
func openFakeGPT(t *testing.T) (*cudalib.Lib, *cudalib.GPT) {
	t.Helper()
	lib, err := cudalib.Load(cudalibtest.BuildFake(t))
	if err != nil {
		t.Fatal(err)
	}
	g, err := cudalib.OpenGPT(lib)
	if err != nil {
		t.Fatal(err)
	}
	return lib, g
}

// fakeStream is a zeroed log buffer in the fake's device memory, and a
// function that reads what the launchers wrote to it since the last read.
func fakeStream(t *testing.T, lib *cudalib.Lib) (uintptr, func() string) {
	t.Helper()
	s, err := lib.DevAlloc(fakeLogCap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lib.DevFree(s) })
	zero := make([]byte, fakeLogCap)
	return s, func() string {
		buf := make([]byte, fakeLogCap)
		if err := lib.CopyDtoH(buf, s); err != nil {
			t.Fatal(err)
		}
		if err := lib.CopyHtoD(s, zero); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(string(buf[:strings.IndexByte(string(buf), 0)]), "\n")
	}
}

func TestGPTOpenOnceWithItsABI(t *testing.T) {
	lib, g := openFakeGPT(t)
	if v := g.ABIVersion(); v != cudalib.GPTABIVersion {
		t.Fatalf("GPT ABI %d, want %d", v, cudalib.GPTABIVersion)
	}
	again, err := cudalib.OpenGPT(lib)
	if err != nil || again != g || g.Lib() != lib {
		t.Fatalf("second OpenGPT = %p, %v; want %p", again, err, g)
	}
}

func TestGPTRefusesOtherABI(t *testing.T) {
	lib, err := cudalib.Load(cudalibtest.BuildFake(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_SDG_ABI", "99")
	_, err = cudalib.OpenGPT(lib)
	if !errors.Is(err, cudalib.ErrUnavailable) || !strings.Contains(err.Error(), "GPT ABI 99") || !strings.Contains(err.Error(), "cuda/build.sh") {
		t.Fatalf("OpenGPT of an ABI-99 library = %v", err)
	}
}

func TestGPTLibraryWithoutKernels(t *testing.T) {
	lib, err := cudalib.Load(cudalibtest.BuildFakeRuntimeOnly(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cudalib.OpenGPT(lib)
	if !errors.Is(err, cudalib.ErrUnavailable) {
		t.Fatalf("OpenGPT without sdg_* = %v, want ErrUnavailable", err)
	}
	for _, want := range []string{"lacks the GPT entry points", "sdg_abi_version", "sdg_attention_backward_cudnn", "cuda/build.sh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// Every kind of argument arrives as given (the fake logs them), values come
// back, and a failing launch is a *GPTError with the fake's message.
func TestGPTRoundTrip(t *testing.T) {
	lib, g := openFakeGPT(t)
	stream, log := fakeStream(t, lib)

	if err := g.AttentionForwardWMMA(0x1000, 0x2000, 0x3000, 6, 64, 64, 2, stream); err != nil {
		t.Fatal(err)
	}
	if got, want := log(), "sdg_attention_forward/wmma out=0x1000 lse=0x2000 qkv=0x3000 B=6 T=64 C=64 NH=2"; got != want {
		t.Fatalf("log %q\nwant %q", got, want)
	}
	err := g.AttentionForwardMMA(0x1000, 0x2000, 0x3000, 6, 64, 768, 12, stream)
	var ge *cudalib.GPTError
	if !errors.As(err, &ge) || ge.Code != cudalib.GPTErrArg || ge.Call != "sdg_attention_forward_mma" || !errors.Is(err, cudalib.ErrArgument) {
		t.Fatalf("AttentionForwardMMA with T=64 = %#v", err)
	}
	if want := "sdg_attention_forward_mma: fake: mma: T=64"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	if s := log(); s != "" {
		t.Fatalf("a failed launch logged %q", s)
	}

	if n, want := g.AttentionBackwardScratchBytes(2, 64, 384, 12), 2*12*64*4; n != want {
		t.Errorf("AttentionBackwardScratchBytes = %d, want %d", n, want)
	}
	if !g.AttentionMMASupported(128, 768, 12) || g.AttentionMMASupported(64, 768, 12) || g.AttentionMMASupported(128, 384, 12) {
		t.Error("AttentionMMASupported does not follow the fake's rule (hs 64, T a multiple of 128)")
	}
	if err := g.AttentionForward(0x10, 0x20, 0x30, 2, 128, 768, 12, stream); err != nil {
		t.Fatal(err)
	}
	if err := g.AttentionBackwardWMMA(0x11, 0x12, 0x13, 0x14, 0x15, 2, 64, 384, 12, 0x16, stream); err != nil {
		t.Fatal(err)
	}
	if got, want := log(), "sdg_attention_forward/mma out=0x10 lse=0x20 qkv=0x30 B=2 T=128 C=768 NH=12\n"+
		"sdg_attention_backward/wmma dqkv=0x11 dout=0x12 qkv=0x13 out=0x14 lse=0x15 B=2 T=64 C=384 NH=12 scratch=0x16"; got != want {
		t.Fatalf("log %q\nwant %q", got, want)
	}
	if err := g.AttentionForwardMMA(0x10, 0x20, 0x30, 2, 64, 768, 12, stream); err == nil || err.Error() != "sdg_attention_forward_mma: fake: mma: T=64" {
		t.Fatalf("AttentionForwardMMA with T=64 = %v", err)
	}

	// A successful launch allocates nothing.
	if n := testing.AllocsPerRun(50, func() {
		if err := g.AttentionForwardWMMA(0x1, 0x2, 0x3, 1, 64, 64, 2, 0); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per AttentionForwardWMMA, want 0", n)
	}
}
