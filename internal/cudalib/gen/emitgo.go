package main

import (
	"bytes"
	"fmt"
	"go/token"
	"strings"
	"unicode"
)

// goNames are the Go names of compute entry points that are not the name
// in CamelCase without "sdc_". "" marks one whose Go side is written by hand
// in compute_cgo.go (OpenCompute, NewContext, Close, DeviceName).
var goNames = map[string]string{
	"sdc_abi_version":    "",
	"sdc_create":         "",
	"sdc_destroy":        "",
	"sdc_device_name":    "",
	"sdc_lt_plan_create": "LtPlan",
}

// initialisms are words spelled otherwise than Title case in Go names.
var initialisms = map[string]string{"htod": "HtoD", "dtoh": "DtoH", "abi": "ABI", "gpu": "GPU", "id": "ID", "bf16": "BF16", "rms": "RMS", "swiglu": "SwiGLU"}

// goStructs are the structs that compute entry points take by pointer: the
// Go type the method takes instead, and the hand-written method of Context
// (compute_cgo.go) that copies it into the context's C memory.
var goStructs = map[string]struct{ goType, fill string }{
	"sdc_step":           {"StepValues", "setStep"},
	"sdc_optim":          {"OptimArgs", "setOptim"},
	"sdc_lt_args":        {"LtArgs", "setLtArgs"},
	"sdc_bf16_gemm_desc": {"GemmDesc", "setGemmDesc"},
}

// goScalar is how a C type travels as a Go parameter or result: the Go type,
// the conversion of a Go value v to C (%s is v), and of a C value to Go.
type goScalar struct {
	goType, toC, toGo string
}

// goScalars are the rules of the parameters: a uint64_t is a device address
// (uintptr), an sdc_handle an opaque uint64, an sdc_flag a bool, an sdc_dtype a
// DType (the element type of a tensor), an sdc_attn an AttentionImpl (the
// kernels of a bf16 attention), integers are ints, an int64_t named *_ns a
// time.Duration (see goParam).
var goScalars = map[string]goScalar{
	"int":        {"int", "C.int(%s)", "int(%s)"},
	"int32_t":    {"int", "C.int32_t(%s)", "int(%s)"},
	"int64_t":    {"int", "C.int64_t(%s)", "int(%s)"},
	"size_t":     {"int", "C.size_t(%s)", "int(%s)"},
	"uint32_t":   {"uint32", "C.uint32_t(%s)", "uint32(%s)"},
	"uint64_t":   {"uintptr", "C.uint64_t(%s)", "uintptr(%s)"},
	"float":      {"float32", "C.float(%s)", "float32(%s)"},
	"double":     {"float64", "C.double(%s)", "float64(%s)"},
	"sdc_flag":   {"bool", "C.sdc_flag(sdcFlag(%s))", "%s != 0"},
	"sdc_act":    {"Activation", "C.sdc_act(%s)", "Activation(%s)"},
	"sdc_dtype":  {"DType", "C.sdc_dtype(%s)", "DType(%s)"},
	"sdc_attn":   {"AttentionImpl", "C.sdc_attn(%s)", "AttentionImpl(%s)"},
	"sdc_handle": {"uint64", "C.sdc_handle(%s)", "uint64(%s)"},
	"void *":     {"unsafe.Pointer", "%s", "%s"},
}

// A method is the Go side of one compute entry point.
type method struct {
	f       cfunc
	name    string
	params  []string // "name type"
	results []string // Go types, without the error
	fills   []string // statements before the call
	args    []string // the wrapper's arguments after the table and memory
	rets    []string // the results' expressions
}

// signature is the method's Go signature after its name.
func (m method) signature() string {
	res := "error"
	if len(m.results) > 0 {
		res = "(" + strings.Join(append(append([]string(nil), m.results...), "error"), ", ") + ")"
	}
	return "(" + strings.Join(m.params, ", ") + ") " + res
}

// computeMethods derives the Go method of every compute entry point that
// is not written by hand.
func computeMethods(hs []*header) ([]method, error) {
	var ms []method
	for _, h := range hs {
		for _, f := range h.funcs {
			name, ok := goNames[f.name]
			if ok && name == "" {
				continue
			}
			if !ok {
				name = camel(strings.TrimPrefix(f.name, "sdc_"), true)
			}
			m, err := goMethod(f, name)
			if err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
	}
	return ms, nil
}

// goReserved are names a Go parameter may not take in a generated method.
var goReserved = map[string]bool{"c": true, "C": true, "err": true, "unsafe": true, "time": true}

// goMethod is f's method: parameters in the header's order, less the
// context and the outputs, which become results.
func goMethod(f cfunc, name string) (method, error) {
	m := method{f: f, name: name}
	slots, err := classify(f)
	if err != nil {
		return m, err
	}
	for _, sl := range slots {
		p := sl.p
		switch sl.kind {
		case kCtx:
		case kStruct:
			st, ok := goStructs[p.base]
			if !ok {
				return m, fmt.Errorf("%s: struct %s has no Go type in goStructs", f.name, p.base)
			}
			n := goParam(p.name)
			m.params = append(m.params, n+" "+st.goType)
			m.fills = append(m.fills, fmt.Sprintf("c.%s(%s)", st.fill, n))
		case kOut:
			sc, ok := goScalars[sl.base]
			if !ok {
				return m, fmt.Errorf("%s: no Go type for an output of type %s", f.name, sl.base)
			}
			m.results = append(m.results, sc.goType)
			m.rets = append(m.rets, fmt.Sprintf(sc.toGo, "c.x."+sl.field))
		case kStr:
			m.results = append(m.results, "string")
			m.rets = append(m.rets, fmt.Sprintf("C.GoString(&c.x.%s[0])", sl.field))
		default:
			n := goParam(p.name)
			key := p.base
			if p.stars == 1 {
				key = "void *"
			}
			if key == "int64_t" && strings.HasSuffix(p.name, "_ns") {
				n = goParam(strings.TrimSuffix(p.name, "_ns"))
				m.params = append(m.params, n+" time.Duration")
				m.args = append(m.args, fmt.Sprintf("C.int64_t(%s.Nanoseconds())", n))
				continue
			}
			sc, ok := goScalars[key]
			if !ok {
				return m, fmt.Errorf("%s: no Go type for parameter %q", f.name, p.origin)
			}
			m.params = append(m.params, n+" "+sc.goType)
			m.args = append(m.args, fmt.Sprintf(sc.toC, n))
		}
	}
	return m, nil
}

// goParam is a C parameter's name as a Go parameter: lowerCamelCase (an
// all-capitals shape name such as NH or KVH in lower case), and not one the
// generated body uses itself.
func goParam(n string) string {
	g := camel(n, false)
	if strings.ToUpper(n) == n {
		g = strings.ToLower(n)
	}
	if goReserved[g] || token.IsKeyword(g) {
		g += "Arg"
	}
	return g
}

// camel joins the words of a snake_case name: CamelCase when upper, else
// lowerCamelCase.
func camel(n string, upper bool) string {
	var b strings.Builder
	for i, w := range strings.Split(n, "_") {
		if w == "" {
			continue
		}
		if i == 0 && !upper {
			r := []rune(w)
			r[0] = unicode.ToLower(r[0])
			b.WriteString(string(r))
			continue
		}
		if s, ok := initialisms[w]; ok {
			b.WriteString(s)
			continue
		}
		r := []rune(w)
		r[0] = unicode.ToUpper(r[0])
		b.WriteString(string(r))
	}
	return b.String()
}

// docLines is the Go doc comment of a method: what it calls, then the
// header's comment, indented.
func docLines(name string, f cfunc) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// %s calls %s (%s).\n", name, f.name, f.header)
	if len(f.doc) > 0 {
		b.WriteString("//\n")
		for _, l := range f.doc {
			if l == "" {
				b.WriteString("//\n")
			} else {
				b.WriteString("//\t" + l + "\n")
			}
		}
	}
	return b.String()
}

// computeGo is compute_gen_cgo.go: the generated methods of Context.
func computeGo(hs []*header, ms []method) ([]byte, error) {
	var body bytes.Buffer
	for _, m := range ms {
		body.WriteString("\n" + docLines(m.name, m.f))
		fmt.Fprintf(&body, "func (c *Context) %s%s {\n", m.name, m.signature())
		for _, s := range m.fills {
			body.WriteString("\t" + s + "\n")
		}
		call := fmt.Sprintf("c.check(%q, C.cw_%s(%s))", m.f.name, m.f.name, strings.Join(append([]string{"c.cp.t", "c.x"}, m.args...), ", "))
		writeCallReturn(&body, call, m.rets)
	}
	return cgoFile("compute_gen_cgo.go", "compute_gen.h", &body)
}

// writeCallReturn ends a generated method: return the checked call, or run
// it and return the outputs with its error.
func writeCallReturn(body *bytes.Buffer, call string, rets []string) {
	if len(rets) == 0 {
		fmt.Fprintf(body, "\treturn %s\n}\n", call)
		return
	}
	fmt.Fprintf(body, "\terr := %s\n\treturn %s, err\n}\n", call, strings.Join(rets, ", "))
}

// cgoFile is a generated cgo file: the build constraint, the C preamble
// including header, the imports body uses, then body.
func cgoFile(name, header string, body *bytes.Buffer) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n\n//go:build cgo\n\npackage cudalib\n\n", generatedLine)
	b.WriteString("/*\n#include \"" + header + "\"\n*/\nimport \"C\"\n\n")
	writeImports(&b, body.String())
	b.Write(body.Bytes())
	return gofmt(name, b.Bytes())
}

// writeImports writes the imports of the standard packages that body uses.
func writeImports(b *bytes.Buffer, body string) {
	var imps []string
	for _, p := range []string{"time", "unsafe"} {
		if strings.Contains(body, p+".") {
			imps = append(imps, fmt.Sprintf("%q", p))
		}
	}
	if len(imps) > 0 {
		b.WriteString("import (\n\t" + strings.Join(imps, "\n\t") + "\n)\n")
	}
}

// abiGo is abi_gen.go: the ABI versions and the Device interface.
func abiGo(hs []*header, ms []method) ([]byte, error) {
	var body bytes.Buffer
	versions := map[string]string{"SD_ABI_VERSION": "ABIVersion", "SDC_ABI_VERSION": "ComputeABIVersion"}
	body.WriteString("\n// The C ABI versions this package speaks: Load and OpenCompute refuse a\n// library built for others.\nconst (\n")
	for _, h := range hs {
		if h.version == "" {
			continue
		}
		name, ok := versions[h.version]
		if !ok {
			name = camel(strings.ToLower(strings.TrimSuffix(h.version, "_ABI_VERSION")), true) + "ABIVersion"
		}
		fmt.Fprintf(&body, "\t// %s is %s of %s.\n\t%s = %d\n", name, h.version, h.path, name, h.abi)
	}
	body.WriteString(")\n")
	body.WriteString(`
// Device is what compute/cuda's engine needs of a compute context: one method
// per compute entry point of the headers, with the context's Info,
// DeviceName and Close. *Context is the real one; compute/cuda/cudatest
// emulates one on the host.
type Device interface {
	Info() ContextInfo
	DeviceName() (string, error)
	Close() error

`)
	for _, m := range ms {
		fmt.Fprintf(&body, "\t// %s: %s.\n\t%s%s\n", m.name, m.f.name, m.name, m.signature())
	}
	body.WriteString("}\n\nvar _ Device = (*Context)(nil)\n")
	writeUnemulated(&body, ms)
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n\npackage cudalib\n\n", generatedLine)
	writeImports(&b, body.String())
	b.Write(body.Bytes())
	return gofmt("abi_gen.go", b.Bytes())
}

// writeUnemulated writes UnemulatedDevice: every method of Device answering
// ErrNotEmulated (zero values besides). A host emulation embeds it, so that
// a new entry point needs nothing of it until a test of it runs there.
func writeUnemulated(body *bytes.Buffer, ms []method) {
	zeros := func(types []string, entry string) string {
		var rs []string
		for _, t := range types {
			rs = append(rs, "*new("+t+")")
		}
		rs = append(rs, "notEmulated(\""+entry+"\")")
		return "return " + strings.Join(rs, ", ")
	}
	body.WriteString(`
// UnemulatedDevice gives every compute entry point of Device that a host
// emulation does not define: it fails with ErrNotEmulated. Embed it.
type UnemulatedDevice struct{}
`)
	for _, m := range ms {
		fmt.Fprintf(body, "\n// %s fails: %s is not emulated.\nfunc (UnemulatedDevice) %s%s { %s }\n", m.name, m.f.name, m.name, m.signature(), zeros(m.results, m.f.name))
	}
}
