package main

import (
	"bytes"
	"fmt"
	"strings"
)

// fakeGPTFile is the generated part of the fake library's GPT kernels
// (cudalibtest builds it with testdata/fake_symddp_gpt.c), in outDir.
const fakeGPTFile = "testdata/fake_gpt_gen.c"

// fakeGPTC writes a default fake of every GPT launcher (an entry point
// that returns int and takes a void *stream), defined weak: it appends
// "name arg=value ..." to the stream's log with fake_sdg_log and returns
// SDG_OK. A launcher that must check its arguments or compute something is
// written out in fake_symddp_gpt.c, whose strong definition the linker
// takes instead; a new launcher needs no line there.
func fakeGPTC(hs []*header) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n\n", generatedLine)
	b.WriteString(`/* The fake library's default GPT launchers: each logs its name and arguments
 * to the stream (fake_symddp_gpt.c's fake_sdg_log) and returns SDG_OK. Weak:
 * fake_symddp_gpt.c's own definitions, which check or compute, win. */
#include <stddef.h>
#include <stdint.h>

#include "symddp_gpt.h"

void fake_sdg_log(void *stream, const char *fmt, ...);
`)
	for _, h := range hs {
		for _, f := range h.funcs {
			if f.ret != "int" || !hasStream(f) {
				continue
			}
			var decl, format, args []string
			for _, p := range f.params {
				decl = append(decl, p.decl(p.name))
				spec, arg, err := fakeLogArg(p)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", f.name, err)
				}
				if p.name == "stream" {
					continue
				}
				format = append(format, p.name+"="+spec)
				args = append(args, arg)
			}
			fmt.Fprintf(&b, "\n__attribute__((weak)) int %s(%s) {\n", f.name, strings.Join(decl, ", "))
			fmt.Fprintf(&b, "    fake_sdg_log(stream, %q", f.name+" "+strings.Join(format, " "))
			for _, a := range args {
				fmt.Fprintf(&b, ", %s", a)
			}
			b.WriteString(");\n    return SDG_OK;\n}\n")
		}
	}
	return b.Bytes(), nil
}

// hasStream says whether f takes a void *stream (a launcher).
func hasStream(f cfunc) bool {
	for _, p := range f.params {
		if p.name == "stream" && p.base == "void" && p.stars == 1 && !p.isCon {
			return true
		}
	}
	return false
}

// fakeLogArg is a parameter's printf conversion and argument in the fake's
// log: pointers as 0x%lx, the scalars by their type.
func fakeLogArg(p cparam) (spec, arg string, err error) {
	if p.stars > 0 {
		return "0x%lx", "(unsigned long)(uintptr_t)" + p.name, nil
	}
	switch p.base {
	case "int":
		return "%d", p.name, nil
	case "int64_t":
		return "%lld", "(long long)" + p.name, nil
	case "float":
		return "%g", "(double)" + p.name, nil
	case "size_t":
		return "%zu", p.name, nil
	}
	return "", "", fmt.Errorf("parameter %s: no log format for %s (fakeLogArg)", p.name, p.ctype)
}
