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

// A shape named in capitals (NH, KVH) is a Go parameter in lower case, a
// C one that the body uses itself gets "Arg", and an sdc_attn is an
// AttentionImpl.
func TestShapeParameterNames(t *testing.T) {
	h, err := parseHeader("cuda/example.h", "int sdc_att(const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t C, int64_t NH, int64_t KVH);\n", "sdc_")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := computeMethods([]*header{h})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ms[0].name+ms[0].signature(), "Att(impl AttentionImpl, b int, cArg int, nh int, kvh int) error"; got != want {
		t.Errorf("method %s, want %s", got, want)
	}
}

// An entry point whose return type the generator does not know is refused
// by name, not left out of the bindings without a word.
func TestUnknownReturnTypeFails(t *testing.T) {
	for _, decl := range []string{"float sdc_time(const sdc_ctx *c);\n", "double sdc_ratio(const sdc_ctx *c);\n"} {
		prefix := decl[strings.Index(decl, " ")+1 : strings.Index(decl, "_")+1]
		_, err := parseHeader("cuda/example.h", "int "+prefix+"ok(void);\n"+decl, prefix)
		if err == nil || !strings.Contains(err.Error(), "return type") || !strings.Contains(err.Error(), prefix) {
			t.Errorf("%q: parseHeader error %v, want one naming the entry point and its return type", decl, err)
		}
	}
}
