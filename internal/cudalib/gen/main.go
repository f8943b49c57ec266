// Command gen generates internal/cudalib's bindings of the GPU library's C
// ABI from its headers, so that the headers are the one description of the
// ABI. Run it with
//
//	go generate ./internal/cudalib
//
// It reads the headers in inputs and writes, in internal/cudalib:
//
//   - lib_gen.h: the table of the runtime's entry points (sd_*) that Load
//     binds with dlsym, and one C wrapper per entry point, which lib_cgo.go's
//     hand-written methods call;
//   - compute_gen.h and compute_gen_cgo.go: the same for the compute entry
//     points (sdc_*), and one Context method per entry point, derived from
//     its C declaration (see goParam for the rules);
//   - abi_gen.go: the ABI versions that Load and OpenCompute check, the
//     Device interface (the methods of Context that compute/cuda uses), and
//     UnemulatedDevice, which a host emulation embeds for the entry points
//     it does not emulate;
//   - nocgo_gen.go: the stand-ins of every exported method of the cgo files
//     for builds without cgo.
//
// A new entry point is one declaration in its header (and its definition in
// cuda/*.cu); a new header is one line in inputs. TestGeneratedFilesCurrent
// fails when a header changed and the files were not generated again.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"sort"
)

// A group is a table of entry points bound together: the runtime's (Lib)
// or the compute context's (Compute, Context).
type group int

const (
	libGroup group = iota
	computeGroup
)

// An input is a header and the group its entry points join.
type input struct {
	path   string // from the module root
	prefix string // the names of its entry points start with it
	group  group
}

// inputs are the headers of the C ABI. A header of more compute entry
// points is one more line here.
var inputs = []input{
	{path: "cuda/symddp_cuda.h", prefix: "sd_", group: libGroup},
	{path: "cuda/symddp_compute.h", prefix: "sdc_", group: computeGroup},
}

// outDir is where the generated files go, from the module root.
const outDir = "internal/cudalib"

// handWritten are the files whose methods the no-cgo stand-ins mirror, and
// the no-cgo files whose own definitions are not generated again.
var (
	cgoFiles   = []string{"lib_cgo.go", "compute_cgo.go"}
	nocgoFiles = []string{"lib_nocgo.go", "compute_nocgo.go"}
	// genCgoFiles are the generated cgo files whose methods get stand-ins too.
	genCgoFiles = []string{"compute_gen_cgo.go"}
)

func main() {
	check := flag.Bool("check", false, "report stale files instead of writing them")
	flag.Parse()
	root, err := moduleRoot()
	if err != nil {
		fatal(err)
	}
	files, err := generate(root)
	if err != nil {
		fatal(err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	stale := 0
	for _, name := range names {
		path := filepath.Join(root, outDir, name)
		old, _ := os.ReadFile(path)
		if bytes.Equal(old, files[name]) {
			continue
		}
		if *check {
			fmt.Fprintf(os.Stderr, "%s is stale\n", filepath.Join(outDir, name))
			stale++
			continue
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			fatal(err)
		}
	}
	if stale > 0 {
		fatal(fmt.Errorf("%d generated files are stale: run go generate ./internal/cudalib", stale))
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "cudalib/gen:", err)
	os.Exit(1)
}

// moduleRoot is the first directory with go.mod at or above the working
// directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// generate reads the headers under root and returns the generated files by
// name (in outDir), formatted.
func generate(root string) (map[string][]byte, error) {
	var lib, cmp []*header
	for _, in := range inputs {
		src, err := os.ReadFile(filepath.Join(root, in.path))
		if err != nil {
			return nil, err
		}
		h, err := parseHeader(in.path, string(src), in.prefix)
		if err != nil {
			return nil, err
		}
		if in.group == libGroup {
			lib = append(lib, h)
		} else {
			cmp = append(cmp, h)
		}
	}
	out := map[string][]byte{}
	var err error
	if out["lib_gen.h"], err = libC(lib); err != nil {
		return nil, err
	}
	if out["compute_gen.h"], err = computeC(cmp); err != nil {
		return nil, err
	}
	methods, err := computeMethods(cmp)
	if err != nil {
		return nil, err
	}
	if out["compute_gen_cgo.go"], err = computeGo(cmp, methods); err != nil {
		return nil, err
	}
	all := append(append([]*header(nil), lib...), cmp...)
	if out["abi_gen.go"], err = abiGo(all, methods); err != nil {
		return nil, err
	}
	// The stand-ins mirror the hand-written cgo files and the generated ones.
	sources := map[string][]byte{}
	for _, name := range genCgoFiles {
		sources[name] = out[name]
	}
	for _, name := range append(append([]string(nil), cgoFiles...), nocgoFiles...) {
		b, err := os.ReadFile(filepath.Join(root, outDir, name))
		if err != nil {
			return nil, err
		}
		sources[name] = b
	}
	if out["nocgo_gen.go"], err = nocgoGo(sources); err != nil {
		return nil, err
	}
	return out, nil
}

// gofmt formats generated Go, or says where it is broken.
func gofmt(name string, src []byte) ([]byte, error) {
	b, err := format.Source(src)
	if err != nil {
		return nil, fmt.Errorf("generated %s does not parse: %w\n%s", name, err, src)
	}
	return b, nil
}

// generatedLine is the first line of every generated file.
const generatedLine = "Code generated by internal/cudalib/gen from the C headers; DO NOT EDIT."
