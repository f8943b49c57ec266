package main

import (
	"bytes"
	"fmt"
	"go/token"
	"strings"
)

// The GPT kernels' entry points (sdg_*, cuda/symddp_gpt.h) are launchers on
// raw device memory: the header's pointers are device addresses (bf16
// tensors void *, fp32 float *, token ids int32_t *), streams and cuBLASLt
// handles void *, plans an opaque struct. Their rules (gptClassify) differ
// from the compute context's: no context, every pointer is a uintptr but for
// the host structs of gptHostStructs and the plan outputs (T ** of an opaque
// T), and an int return is a status, SDG_OK or SDG_ERR_*, unless
// gptValueReturns says otherwise.

// gptHostStructs are the structs an sdg_* entry point reads from HOST memory
// (the rest are device memory): the Go type the method takes and the
// hand-written function of gpt_cgo.go that copies it into the call's C
// memory.
var gptHostStructs = map[string]struct{ goType, fill string }{
	"sdg_gemm_desc": {"GemmDesc", "setGemmDesc"},
}

// gptDeviceStructs are the structs an sdg_* entry point reads from DEVICE
// memory, by address: a uintptr in Go (sdg_adamw's hyper, which a graph
// replays with new values).
var gptDeviceStructs = map[string]bool{
	"sdg_adamw_hyper": true,
}

// gptValueReturns are the sdg_* entry points whose int result is a value,
// not a status: the Go type and the conversion of the C value (%s).
var gptValueReturns = map[string]goScalar{
	"sdg_attention_mma_supported":   {"bool", "", "%s != 0"},
	"sdg_attention_cudnn_supported": {"bool", "", "%s != 0"},
	"sdg_gemm_tuned_ns":             {"int", "", "int(%s)"},
}

// gptNames are the Go names of sdg_* entry points that are not the name in
// CamelCase without "sdg_"; "" marks one written by hand in gpt_cgo.go.
var gptNames = map[string]string{
	"sdg_abi_version":                "",
	"sdg_last_error":                 "",
	"sdg_adamw":                      "AdamW",
	"sdg_gqa_forward":                "GQAForward",
	"sdg_gqa_backward_scratch_bytes": "GQABackwardScratchBytes",
	"sdg_gqa_backward":               "GQABackward",
}

// gptDevScalars are the pointed-to types of device pointers.
var gptDevScalars = map[string]bool{
	"void": true, "float": true, "int32_t": true, "int64_t": true, "uint8_t": true, "uint32_t": true,
	"uint64_t": true,
}

// gptScalars are the types an sdg_* parameter may have by value.
var gptScalars = map[string]goScalar{
	"int":      {"int", "C.int(%s)", "int(%s)"},
	"int32_t":  {"int", "C.int32_t(%s)", "int(%s)"},
	"int64_t":  {"int", "C.int64_t(%s)", "int(%s)"},
	"size_t":   {"int", "C.size_t(%s)", "int(%s)"},
	"uint32_t": {"uint32", "C.uint32_t(%s)", "uint32(%s)"},
	"float":    {"float32", "C.float(%s)", "float32(%s)"},
	"double":   {"float64", "C.double(%s)", "float64(%s)"},
}

// What an sdg_* parameter is.
const (
	gValue  ckind = iota // a scalar by value
	gDev                 // a device address, stream, cuBLASLt handle or plan: uintptr
	gHost                // a host struct by pointer, from the call's C memory
	gHandle              // T ** of an opaque T: a plan made, into the call's C memory
)

// gptClassify works out the slots of an sdg_* entry point's parameters
// (cslot.kind holds a g* kind). opaque are the header's opaque types.
func gptClassify(f cfunc, opaque map[string]bool) ([]cslot, error) {
	var slots []cslot
	count := map[string]int{}
	for _, p := range f.params {
		switch {
		case p.stars == 0:
			if _, ok := gptScalars[p.base]; !ok {
				return nil, fmt.Errorf("%s: parameter %q: a value of type %s", f.name, p.origin, p.base)
			}
			slots = append(slots, cslot{kind: gValue, p: p})
		case p.stars == 1 && (gptDevScalars[p.base] || gptDeviceStructs[p.base] || opaque[p.base]):
			slots = append(slots, cslot{kind: gDev, p: p})
		case p.stars == 1 && p.isCon && gptHostStructs[p.base].goType != "":
			if count[p.base] > 0 {
				return nil, fmt.Errorf("%s: two parameters of struct %s", f.name, p.base)
			}
			count[p.base]++
			slots = append(slots, cslot{kind: gHost, p: p, field: "in_" + p.base})
		case p.stars == 2 && !p.isCon && opaque[p.base]:
			k := count["*"+p.base]
			count["*"+p.base]++
			slots = append(slots, cslot{kind: gHandle, p: p, base: p.base, field: fmt.Sprintf("out_%s[%d]", p.base, k)})
		case p.stars == 1:
			return nil, fmt.Errorf("%s: parameter %q: is %s in host or device memory? (gptHostStructs or gptDeviceStructs)", f.name, p.origin, p.base)
		default:
			return nil, fmt.Errorf("%s: parameter %q: the generator knows no rule for it (see gptClassify)", f.name, p.origin)
		}
	}
	return slots, nil
}

// gptFuncs are the entry points of the GPT headers in order, with their
// slots, and the headers' opaque types.
func gptFuncs(hs []*header) ([]cfunc, [][]cslot, error) {
	opaque := map[string]bool{}
	for _, h := range hs {
		for _, o := range h.opaque {
			opaque[o] = true
		}
	}
	var funcs []cfunc
	var all [][]cslot
	for _, h := range hs {
		for _, f := range h.funcs {
			slots, err := gptClassify(f, opaque)
			if err != nil {
				return nil, nil, err
			}
			funcs = append(funcs, f)
			all = append(all, slots)
		}
	}
	return funcs, all, nil
}

// gptStatus reports whether f returns a status (SDG_OK or SDG_ERR_*).
func gptStatus(f cfunc) bool {
	_, value := gptValueReturns[f.name]
	return f.ret == "int" && !value && !strings.HasSuffix(f.name, "_abi_version")
}

// gptC is gpt_gen.h: the table of the GPT entry points, the C memory of one
// call (the host structs, the plan outputs, the error message) and one
// wrapper per entry point. Wrappers take device addresses as uintptr_t and
// cast them to the header's types, so that Go passes integers only.
func gptC(hs []*header) ([]byte, error) {
	funcs, all, err := gptFuncs(hs)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n\n", generatedLine)
	b.WriteString(`// gpt_gen.h: the GPT kernels' entry points for gpt_cgo.go and gpt_gen_cgo.go:
// their table, which sdgw_open binds with dlsym, the C memory of one call
// (so that no call needs Go memory) and one wrapper per entry point.
#ifndef SYMDDP_GPT_GEN_H
#define SYMDDP_GPT_GEN_H

#include <stdint.h>
`)
	includeAll(&b, hs)
	writeTable(&b, funcs, "SDGI_", "sdgw_names")
	var mem callMemory
	for _, slots := range all {
		mem.entry()
		for _, sl := range slots {
			switch sl.kind {
			case gHost:
				mem.useStruct(sl.p.base)
			case gHandle:
				mem.useOut(sl.base)
			}
		}
	}
	b.WriteString(`
// Defined in lib_cgo.go's preamble.
void *sdw_dlopen(const char *path, char *err, size_t cap);
size_t sdw_bind(void *h, const char *const *names, int n, void **fn, char *err, size_t cap);

typedef struct {
	void *fn[SDGI_count];
} sdgw_table;

// The C memory of one call.
typedef struct {
`)
	for _, s := range mem.structs {
		fmt.Fprintf(&b, "\t%s in_%s;\n", s, s)
	}
	for _, o := range mem.outOrder {
		fmt.Fprintf(&b, "\t%s *out_%s[%d];\n", o, o, mem.outs[o])
	}
	b.WriteString(`	char err[1024];
} sdgw_call;

#define SDGF(name, t) ((__typeof__(&name))((t)->fn[SDGI_##name]))

// sdgw_ret keeps the library's message of a failure, read on the thread
// that saw it (sdg_last_error is thread-local in the library).
static inline int sdgw_ret(const sdgw_table *t, sdgw_call *x, int rc) {
	if (rc != 0) {
		const char *m = SDGF(sdg_last_error, t)();
		snprintf(x->err, sizeof x->err, "%s", m ? m : "");
	}
	return rc;
}

#define SDGW const sdgw_table *t, sdgw_call *x
#define SDGR(expr) return sdgw_ret(t, x, (expr))

`)
	reserved := map[string]bool{"t": true, "x": true}
	for i, f := range funcs {
		if f.ret == "const char *" {
			continue // sdg_last_error: called by sdgw_ret
		}
		w := "gw_" + f.name
		status := gptStatus(f)
		decls, args := []string{"const sdgw_table *t"}, []string(nil)
		if status {
			decls = []string{"SDGW"}
		}
		for _, sl := range all[i] {
			n := cName(sl.p.name, reserved)
			switch sl.kind {
			case gDev:
				decls = append(decls, "uintptr_t "+n)
				args = append(args, fmt.Sprintf("(%s)%s", sl.p.ctype, n))
			case gHost, gHandle:
				args = append(args, "&x->"+sl.field)
			default:
				decls = append(decls, sl.p.decl(n))
				args = append(args, n)
			}
		}
		if !status && strings.Contains(strings.Join(args, ""), "&x->") {
			return nil, fmt.Errorf("%s: C memory of a call for an entry point without a status", f.name)
		}
		call := fmt.Sprintf("SDGF(%s, t)(%s)", f.name, strings.Join(args, ", "))
		switch {
		case status:
			fmt.Fprintf(&b, "static inline int %s(%s) { SDGR(%s); }\n", w, strings.Join(decls, ", "), call)
		case f.ret == "void":
			fmt.Fprintf(&b, "static inline void %s(%s) { %s; }\n", w, strings.Join(decls, ", "), call)
		default:
			fmt.Fprintf(&b, "static inline %s %s(%s) { return %s; }\n", f.ret, w, strings.Join(decls, ", "), call)
		}
	}
	b.WriteString("\n#endif\n")
	return b.Bytes(), nil
}

// gptReserved are names a Go parameter may not take in a generated GPT
// method: the receiver, the call's memory and the body's locals.
var gptReserved = map[string]bool{"g": true, "x": true, "C": true, "err": true, "unsafe": true, "rc": true}

// gptParam is a C parameter's name as a Go parameter: lowerCamelCase (an
// all-capitals shape name such as NH or OC in lower case).
func gptParam(n string) string {
	g := camel(n, false)
	if strings.ToUpper(n) == n {
		g = strings.ToLower(n)
	}
	if gptReserved[g] || token.IsKeyword(g) {
		g += "Arg"
	}
	return g
}

// gptMethods derives the Go method of every GPT entry point not written by
// hand.
func gptMethods(hs []*header) ([]method, error) {
	funcs, all, err := gptFuncs(hs)
	if err != nil {
		return nil, err
	}
	var ms []method
	for i, f := range funcs {
		name, ok := gptNames[f.name]
		if ok && name == "" {
			continue
		}
		if !ok {
			name = camel(strings.TrimPrefix(f.name, "sdg_"), true)
		}
		m := method{f: f, name: name}
		seen := map[string]bool{}
		for _, sl := range all[i] {
			p := sl.p
			n := gptParam(p.name)
			if sl.kind != gHandle {
				if seen[n] {
					return nil, fmt.Errorf("%s: two parameters named %s in Go", f.name, n)
				}
				seen[n] = true
			}
			switch sl.kind {
			case gDev:
				m.params = append(m.params, n+" uintptr")
				m.args = append(m.args, fmt.Sprintf("C.uintptr_t(%s)", n))
			case gHost:
				st := gptHostStructs[p.base]
				m.params = append(m.params, n+" "+st.goType)
				m.fills = append(m.fills, fmt.Sprintf("%s(x, %s)", st.fill, n))
			case gHandle:
				m.fills = append(m.fills, fmt.Sprintf("x.%s = nil", sl.field))
				m.results = append(m.results, "uintptr")
				m.rets = append(m.rets, fmt.Sprintf("uintptr(unsafe.Pointer(x.%s))", sl.field))
			default:
				sc := gptScalars[p.base]
				m.params = append(m.params, n+" "+sc.goType)
				m.args = append(m.args, fmt.Sprintf(sc.toC, n))
			}
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// gptSignature is m's Go signature after its name: a status becomes the
// error result, a value return the only result, void none.
func gptSignature(m method) string {
	switch {
	case gptStatus(m.f):
		return m.signature()
	case m.f.ret == "void":
		return "(" + strings.Join(m.params, ", ") + ")"
	}
	return "(" + strings.Join(m.params, ", ") + ") " + gptResult(m.f).goType
}

// gptResult is how a value return travels to Go.
func gptResult(f cfunc) goScalar {
	if v, ok := gptValueReturns[f.name]; ok {
		return v
	}
	return gptScalars[f.ret]
}

// gptGo is gpt_gen_cgo.go: the generated methods of GPT.
func gptGo(ms []method) ([]byte, error) {
	var body bytes.Buffer
	for _, m := range ms {
		body.WriteString("\n" + docLines(m.name, m.f))
		fmt.Fprintf(&body, "func (g *GPT) %s%s {\n", m.name, gptSignature(m))
		wrapper := "C.gw_" + m.f.name
		if !gptStatus(m.f) {
			call := fmt.Sprintf("%s(%s)", wrapper, strings.Join(append([]string{"g.t"}, m.args...), ", "))
			if m.f.ret == "void" {
				fmt.Fprintf(&body, "\t%s\n}\n", call)
			} else {
				fmt.Fprintf(&body, "\treturn %s\n}\n", fmt.Sprintf(gptResult(m.f).toGo, call))
			}
			continue
		}
		body.WriteString("\tx := g.call()\n\tdefer g.done(x)\n")
		for _, s := range m.fills {
			body.WriteString("\t" + s + "\n")
		}
		call := fmt.Sprintf("g.check(%q, x, %s(%s))", m.f.name, wrapper, strings.Join(append([]string{"g.t", "x"}, m.args...), ", "))
		writeCallReturn(&body, call, m.rets)
	}
	return cgoFile("gpt_gen_cgo.go", "gpt_gen.h", &body)
}
