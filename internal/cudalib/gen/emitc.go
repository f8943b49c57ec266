package main

import (
	"bytes"
	"fmt"
	"strings"
)

// cScalars are the C types a parameter may have by value (or point to, as an
// out parameter).
var cScalars = map[string]bool{
	"int": true, "int32_t": true, "int64_t": true, "uint32_t": true, "uint64_t": true, "size_t": true,
	"float": true, "double": true, "char": true, "void": true,
	"sdc_flag": true, "sdc_act": true, "sdc_handle": true, "sdc_dtype": true, "sdc_attn": true,
}

// ctxType is the compute context: a parameter of this type (by pointer) is
// the context a Context holds.
const ctxType = "sdc_ctx"

// libC is lib_gen.h: the table of the runtime's entry points and a wrapper
// for each. A wrapper takes the table and an error buffer before the
// header's parameters and copies the library's message of a failure into
// the buffer; the *_abi_version wrappers take the table only.
func libC(hs []*header) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n\n", generatedLine)
	b.WriteString(`// lib_gen.h: the runtime's entry points for lib_cgo.go: their table, which
// sdw_open binds with dlsym, and one wrapper per entry point that keeps the
// library's message of a failure (thread-local in the library) in err.
#ifndef SYMDDP_LIB_GEN_H
#define SYMDDP_LIB_GEN_H

`)
	funcs := includeAll(&b, hs)
	writeTable(&b, funcs, "SDI_", "sdw_names")
	b.WriteString(`
typedef struct {
	void *handle;
	void *fn[SDI_count];
} sdw_table;

// SDF is entry point name of table t, with the header's type.
#define SDF(name, t) ((__typeof__(&name))((t)->fn[SDI_##name]))

// sdw_ret copies the library's message of a failure into err, on the thread
// that saw it.
static inline int sdw_ret(const sdw_table *t, char *err, size_t cap, int rc) {
	if (rc != 0 && err && cap) {
		const char *m = SDF(sd_last_error, t)();
		snprintf(err, cap, "%s", m ? m : "");
	}
	return rc;
}

#define SDW const sdw_table *t, char *err, size_t cap
#define SDR(expr) return sdw_ret(t, err, cap, (expr))

`)
	reserved := map[string]bool{"t": true, "err": true, "cap": true}
	for _, f := range funcs {
		if f.ret != "int" {
			continue // sd_last_error: called by sdw_ret
		}
		w := "w_" + strings.TrimPrefix(f.name, "sd_")
		if strings.HasSuffix(f.name, "_abi_version") {
			fmt.Fprintf(&b, "static inline int %s(const sdw_table *t) { return SDF(%s, t)(); }\n", w, f.name)
			continue
		}
		decls, args := []string{"SDW"}, []string(nil)
		for _, p := range f.params {
			n := cName(p.name, reserved)
			decls = append(decls, p.decl(n))
			args = append(args, n)
		}
		fmt.Fprintf(&b, "static inline int %s(%s) { SDR(SDF(%s, t)(%s)); }\n", w, strings.Join(decls, ", "), f.name, strings.Join(args, ", "))
	}
	b.WriteString("\n#endif\n")
	return b.Bytes(), nil
}

// includeAll writes the #include of every header and returns their entry
// points in order.
func includeAll(b *bytes.Buffer, hs []*header) []cfunc {
	b.WriteString("#include <stdio.h>\n")
	var funcs []cfunc
	for _, h := range hs {
		fmt.Fprintf(b, "#include %q\n", strings.TrimPrefix(h.path, "cuda/"))
		funcs = append(funcs, h.funcs...)
	}
	b.WriteString("\n")
	return funcs
}

// writeTable writes the enum of table indices and the names dlsym looks up.
func writeTable(b *bytes.Buffer, funcs []cfunc, idx, names string) {
	b.WriteString("// The entry points, in the order of " + names + ".\nenum {\n")
	for _, f := range funcs {
		fmt.Fprintf(b, "\t%s%s,\n", idx, f.name)
	}
	fmt.Fprintf(b, "\t%scount\n};\n\nstatic const char *const %s[%scount] = {\n", idx, names, idx)
	for _, f := range funcs {
		fmt.Fprintf(b, "\t%q,\n", f.name)
	}
	b.WriteString("};\n")
}

// cName is a header's parameter name, renamed when a wrapper uses it itself.
func cName(n string, reserved map[string]bool) string {
	if reserved[n] {
		return n + "_"
	}
	return n
}

// A ckind is what a compute entry point's parameter is to its wrapper.
type ckind int

const (
	kValue  ckind = iota // passed through by value (or a host pointer: void *)
	kCtx                 // the context: &x->ctx
	kStruct              // a struct by pointer, from the context's C memory
	kOut                 // a scalar out parameter, into the context's C memory
	kStr                 // char *s, size_t cap: a string out parameter
)

// A cslot is where one parameter of a compute entry point comes from.
type cslot struct {
	kind  ckind
	p     cparam
	field string // x's field (kStruct, kOut, kStr), with the index for kOut and kStr
	base  string // the pointed-to type of kOut ("void *" for void **)
}

// classify works out the slots of f's parameters. The rules: a pointer to
// sdc_ctx is the context; const T * of a struct T is an input from the
// context's C memory; T * of a scalar T (and void **) is an output there;
// char * followed by size_t is a string output; void * and const void *
// are host pointers passed through; the rest are values.
func classify(f cfunc) ([]cslot, error) {
	var slots []cslot
	count := map[string]int{}
	for i := 0; i < len(f.params); i++ {
		p := f.params[i]
		switch {
		case p.base == ctxType && p.stars == 1:
			slots = append(slots, cslot{kind: kCtx, p: p})
		case p.stars == 0:
			if !cScalars[p.base] || p.base == "void" || p.base == "char" {
				return nil, fmt.Errorf("%s: parameter %q: a value of type %s", f.name, p.origin, p.base)
			}
			slots = append(slots, cslot{kind: kValue, p: p})
		case p.base == "void" && p.stars == 1:
			slots = append(slots, cslot{kind: kValue, p: p})
		case p.base == "char" && p.stars == 1 && !p.isCon && i+1 < len(f.params) && f.params[i+1].base == "size_t" && f.params[i+1].stars == 0:
			k := count["str"]
			count["str"]++
			slots = append(slots, cslot{kind: kStr, p: p, field: fmt.Sprintf("out_str[%d]", k)})
			i++ // the size goes with it
		case p.isCon && p.stars == 1 && !cScalars[p.base]:
			if count[p.base] > 0 {
				return nil, fmt.Errorf("%s: two parameters of struct %s", f.name, p.base)
			}
			count[p.base]++
			slots = append(slots, cslot{kind: kStruct, p: p, field: "in_" + p.base})
		case !p.isCon && ((p.stars == 1 && cScalars[p.base] && p.base != "void" && p.base != "char") || (p.base == "void" && p.stars == 2)):
			base := p.base
			if p.stars == 2 {
				base = "void *"
			}
			k := count[base]
			count[base]++
			slots = append(slots, cslot{kind: kOut, p: p, base: base, field: fmt.Sprintf("%s[%d]", outField(base), k)})
		default:
			return nil, fmt.Errorf("%s: parameter %q: the generator knows no rule for it (see classify)", f.name, p.origin)
		}
	}
	return slots, nil
}

// outField is the field of the context's C memory that holds outputs of
// type base.
func outField(base string) string {
	if base == "void *" {
		return "out_ptr"
	}
	return "out_" + base
}

// computeC is compute_gen.h: the table of the compute entry points, the C
// memory of a context (the sdc_ctx, the structs passed by pointer, the out
// parameters, the error message) and a wrapper for each entry point, which
// takes the table and that memory instead of the pointer parameters.
func computeC(hs []*header) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n\n", generatedLine)
	b.WriteString(`// compute_gen.h: the compute entry points for compute_cgo.go and
// compute_gen_cgo.go: their table, which sdcw_open binds with dlsym, the C
// memory of one context (so that no call needs Go memory, and nothing escapes
// to the Go heap) and one wrapper per entry point.
#ifndef SYMDDP_COMPUTE_GEN_H
#define SYMDDP_COMPUTE_GEN_H

`)
	funcs := includeAll(&b, hs)
	writeTable(&b, funcs, "SDCI_", "sdcw_names")
	// The context's C memory: one field per struct type, as many output
	// slots of each type as one entry point needs.
	var mem callMemory
	strs := 0
	all := make([][]cslot, len(funcs))
	for i, f := range funcs {
		if f.ret != "int" {
			return nil, fmt.Errorf("%s: compute entry points return int", f.name)
		}
		slots, err := classify(f)
		if err != nil {
			return nil, err
		}
		all[i] = slots
		mem.entry()
		s := 0
		for _, sl := range slots {
			switch sl.kind {
			case kStruct:
				mem.useStruct(sl.p.base)
			case kOut:
				mem.useOut(sl.base)
			case kStr:
				s++
			}
		}
		strs = max(strs, s)
	}
	b.WriteString(`
// Defined in lib_cgo.go's preamble.
void *sdw_dlopen(const char *path, char *err, size_t cap);
size_t sdw_bind(void *h, const char *const *names, int n, void **fn, char *err, size_t cap);

typedef const char *(*sdcw_msg_fn)(void);

typedef struct {
	void *fn[SDCI_count];
	sdcw_msg_fn last_error;
} sdcw_table;

// The C memory of one context.
typedef struct {
	sdc_ctx ctx;
`)
	for _, s := range mem.structs {
		fmt.Fprintf(&b, "\t%s in_%s;\n", s, s)
	}
	for _, o := range mem.outOrder {
		if o == "void *" {
			fmt.Fprintf(&b, "\tvoid *out_ptr[%d];\n", mem.outs[o])
		} else {
			fmt.Fprintf(&b, "\t%s out_%s[%d];\n", o, o, mem.outs[o])
		}
	}
	if strs > 0 {
		fmt.Fprintf(&b, "\tchar out_str[%d][128];\n", strs)
	}
	b.WriteString(`	char err[1024];
} sdcw_ctx;

#define SDCF(name, t) ((__typeof__(&name))((t)->fn[SDCI_##name]))

// sdcw_ret keeps the library's message of a failure, read on the thread
// that saw it (the message is thread-local in the library).
static inline int sdcw_ret(const sdcw_table *t, sdcw_ctx *x, int rc) {
	if (rc != 0) {
		const char *m = t->last_error();
		snprintf(x->err, sizeof x->err, "%s", m ? m : "");
	}
	return rc;
}

#define SDCW const sdcw_table *t, sdcw_ctx *x
#define SDCR(expr) return sdcw_ret(t, x, (expr))

`)
	reserved := map[string]bool{"t": true, "x": true}
	for i, f := range funcs {
		w := "cw_" + f.name
		if strings.HasSuffix(f.name, "_abi_version") && len(f.params) == 0 {
			fmt.Fprintf(&b, "static inline int %s(const sdcw_table *t) { return SDCF(%s, t)(); }\n", w, f.name)
			continue
		}
		decls, args := []string{"SDCW"}, []string(nil)
		for _, sl := range all[i] {
			switch sl.kind {
			case kCtx:
				args = append(args, "&x->ctx")
			case kStruct:
				args = append(args, "&x->"+sl.field)
			case kOut:
				args = append(args, "&x->"+sl.field)
			case kStr:
				args = append(args, "x->"+sl.field, "sizeof x->"+sl.field)
			default:
				n := cName(sl.p.name, reserved)
				decls = append(decls, sl.p.decl(n))
				args = append(args, n)
			}
		}
		fmt.Fprintf(&b, "static inline int %s(%s) { SDCR(SDCF(%s, t)(%s)); }\n", w, strings.Join(decls, ", "), f.name, strings.Join(args, ", "))
	}
	b.WriteString("\n#endif\n")
	return b.Bytes(), nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// callMemory is what the C memory of a call (or of a context) holds, found
// over the entry points: one field per struct type their slots use, and as
// many output slots of each opaque type as one entry point writes.
type callMemory struct {
	structs  []string       // in order of first use
	outOrder []string       // output types, in order of first use
	outs     map[string]int // the most outputs of a type one entry point writes
	n        map[string]int // the current entry point's
}

// entry starts counting the outputs of the next entry point.
func (m *callMemory) entry() {
	m.n = map[string]int{}
	if m.outs == nil {
		m.outs = map[string]int{}
	}
}

func (m *callMemory) useStruct(base string) {
	if !contains(m.structs, base) {
		m.structs = append(m.structs, base)
	}
}

func (m *callMemory) useOut(base string) {
	m.n[base]++
	if m.n[base] > m.outs[base] {
		if m.outs[base] == 0 {
			m.outOrder = append(m.outOrder, base)
		}
		m.outs[base] = m.n[base]
	}
}
