package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The generated files in internal/cudalib are what the headers give now: a
// header changed without go generate ./internal/cudalib fails here.
func TestGeneratedFilesCurrent(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, outDir, name))
		if err != nil {
			t.Errorf("%s: %v (run go generate ./internal/cudalib)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s is stale: the headers give other contents; run go generate ./internal/cudalib", outDir, name)
		}
		if !bytes.HasPrefix(want, []byte("// "+generatedLine+"\n")) {
			t.Errorf("%s does not start with the generated-code line", name)
		}
	}
}

// A new entry point in a header is one line: its table entry, wrapper,
// Go method, Device method and no-cgo stand-in all follow from it.
func TestNewEntryPointIsOneLine(t *testing.T) {
	src := `/* doc of the example */
#define SDC_ABI_VERSION 7
/*
 * y (n) = a (n) + b (n); flagged when add.
 */
int sdc_add_two(const sdc_ctx *c, uint64_t y, uint64_t a, uint64_t b, int64_t n, sdc_flag add,
                int64_t wait_ns, double *out);
`
	h, err := parseHeader("cuda/example.h", src, "sdc_")
	if err != nil {
		t.Fatal(err)
	}
	if h.version != "SDC_ABI_VERSION" || h.abi != 7 || len(h.funcs) != 1 {
		t.Fatalf("header read as %+v", h)
	}
	ms, err := computeMethods([]*header{h})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ms[0].name+ms[0].signature(), "AddTwo(y uintptr, a uintptr, b uintptr, n int, add bool, wait time.Duration) (float64, error)"; got != want {
		t.Errorf("method %s, want %s", got, want)
	}
	c, err := computeC([]*header{h})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"sdc_add_two",`,
		"static inline int cw_sdc_add_two(SDCW, uint64_t y, uint64_t a, uint64_t b, int64_t n, sdc_flag add, int64_t wait_ns) { SDCR(SDCF(sdc_add_two, t)(&x->ctx, y, a, b, n, add, wait_ns, &x->out_double[0])); }",
	} {
		if !strings.Contains(string(c), want) {
			t.Errorf("compute_gen.h lacks %q:\n%s", want, c)
		}
	}
	g, err := computeGo([]*header{h}, ms)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"// AddTwo calls sdc_add_two (cuda/example.h).", "//\ty (n) = a (n) + b (n); flagged when add.", "C.sdc_flag(sdcFlag(add))", "C.int64_t(wait.Nanoseconds())"} {
		if !strings.Contains(string(g), want) {
			t.Errorf("compute_gen_cgo.go lacks %q:\n%s", want, g)
		}
	}
}

// A parameter the rules do not cover is an error naming the entry point,
// not a guess.
func TestUnknownParameterFails(t *testing.T) {
	h, err := parseHeader("cuda/example.h", "int sdc_odd(const sdc_ctx *c, struct foo *p);\n", "sdc_")
	if err == nil {
		_, err = computeMethods([]*header{h})
	}
	if err == nil || !strings.Contains(err.Error(), "sdc_odd") {
		t.Fatalf("err = %v, want one naming sdc_odd", err)
	}
}

// A GPT launcher is one line too: device pointers, the stream and plans are
// uintptrs, a host struct its Go type, a plan output a result, size_t and
// void returns no error; the fake library gets a default of the launcher.
func TestGPTEntryPoints(t *testing.T) {
	src := `#define SDG_ABI_VERSION 4
typedef struct sdg_gemm_s sdg_gemm;
/* y (n) bf16 = x (n) * s. */
int sdg_scale_bf16(void *y, const float *x, int64_t n, float s, void *stream);
size_t sdg_scale_scratch_bytes(int N, int OC);
int sdg_gemm_create(sdg_gemm **plan, void *lt, const sdg_gemm_desc *d);
void sdg_gemm_destroy(sdg_gemm *plan);
`
	h, err := parseHeader("cuda/example_gpt.h", src, "sdg_")
	if err != nil {
		t.Fatal(err)
	}
	if h.abi != 4 || len(h.funcs) != 4 || len(h.opaque) != 1 || h.opaque[0] != "sdg_gemm" {
		t.Fatalf("header read as %+v", h)
	}
	ms, err := gptMethods([]*header{h})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.name+gptSignature(m))
	}
	want := []string{
		"ScaleBF16(y uintptr, xArg uintptr, n int, s float32, stream uintptr) error",
		"ScaleScratchBytes(n int, oc int) int",
		"GemmCreate(lt uintptr, d GemmDesc) (uintptr, error)",
		"GemmDestroy(plan uintptr)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("methods\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// the fake library's default: only the launcher (int, with a stream)
	fake, err := fakeGPTC([]*header{h})
	if err != nil {
		t.Fatal(err)
	}
	wantFake := "__attribute__((weak)) int sdg_scale_bf16(void *y, const float *x, int64_t n, float s, void *stream) {\n" +
		"    fake_sdg_log(stream, \"sdg_scale_bf16 y=0x%lx x=0x%lx n=%lld s=%g\", (unsigned long)(uintptr_t)y, (unsigned long)(uintptr_t)x, (long long)n, (double)s);\n" +
		"    return SDG_OK;\n}\n"
	if !strings.Contains(string(fake), wantFake) || strings.Count(string(fake), "__attribute__((weak))") != 1 {
		t.Errorf("fake_gpt_gen.c: want exactly\n%s\ngot\n%s", wantFake, fake)
	}
	c, err := gptC([]*header{h})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"static inline int gw_sdg_scale_bf16(SDGW, uintptr_t y, uintptr_t x_, int64_t n, float s, uintptr_t stream) { SDGR(SDGF(sdg_scale_bf16, t)((void *)y, (const float *)x_, n, s, (void *)stream)); }",
		"static inline size_t gw_sdg_scale_scratch_bytes(const sdgw_table *t, int N, int OC) { return SDGF(sdg_scale_scratch_bytes, t)(N, OC); }",
		"static inline int gw_sdg_gemm_create(SDGW, uintptr_t lt) { SDGR(SDGF(sdg_gemm_create, t)(&x->out_sdg_gemm[0], (void *)lt, &x->in_sdg_gemm_desc)); }",
		"static inline void gw_sdg_gemm_destroy(const sdgw_table *t, uintptr_t plan) { SDGF(sdg_gemm_destroy, t)((sdg_gemm *)plan); }",
		"\tsdg_gemm *out_sdg_gemm[1];",
	} {
		if !strings.Contains(string(c), w) {
			t.Errorf("gpt_gen.h lacks %q:\n%s", w, c)
		}
	}
	g, err := gptGo(ms)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"//\ty (n) bf16 = x (n) * s.", "x.out_sdg_gemm[0] = nil", "setGemmDesc(x, d)", `g.check("sdg_scale_bf16", x, C.gw_sdg_scale_bf16(g.t, x, C.uintptr_t(y), C.uintptr_t(xArg)`} {
		if !strings.Contains(string(g), w) {
			t.Errorf("gpt_gen_cgo.go lacks %q:\n%s", w, g)
		}
	}
}

// A struct pointer that is in neither gptHostStructs nor gptDeviceStructs
// is an error that asks which memory it is in, and a host pointer to a
// scalar is not guessed at.
func TestGPTUnknownPointerFails(t *testing.T) {
	for _, src := range []string{
		"int sdg_odd(const sdg_mystery *p, void *stream);\n",
		"int sdg_odd(float **p);\n",
	} {
		h, err := parseHeader("cuda/example_gpt.h", src, "sdg_")
		if err == nil {
			_, err = gptMethods([]*header{h})
		}
		if err == nil || !strings.Contains(err.Error(), "sdg_odd") {
			t.Errorf("%q: err = %v, want one naming sdg_odd", src, err)
		}
	}
}

// An entry point whose return type the generator does not know is refused
// by name, not left out of the bindings without a word.
func TestUnknownReturnTypeFails(t *testing.T) {
	for _, decl := range []string{"float sdg_time(const sdg_gemm *p);\n", "double sdc_ratio(const sdc_ctx *c);\n"} {
		prefix := decl[strings.Index(decl, " ")+1 : strings.Index(decl, "_")+1]
		_, err := parseHeader("cuda/example.h", "int "+prefix+"ok(void);\n"+decl, prefix)
		if err == nil || !strings.Contains(err.Error(), "return type") || !strings.Contains(err.Error(), prefix) {
			t.Errorf("%q: parseHeader error %v, want one naming the entry point and its return type", decl, err)
		}
	}
}
