package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"sort"
	"strconv"
	"strings"
)

// nocgoGo is nocgo_gen.go: for every exported function and method of the
// cgo files that the hand-written no-cgo files do not define, a stand-in
// with the same signature that returns zero values, and errNoCgo as its
// error. sources holds the files by name: cgoFiles, nocgoFiles and
// genCgoFiles.
func nocgoGo(sources map[string][]byte) ([]byte, error) {
	fset := token.NewFileSet()
	defined := map[string]bool{}
	for _, name := range nocgoFiles {
		f, err := parser.ParseFile(fset, name, sources[name], 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				defined[funcKey(fd)] = true
			}
		}
	}
	var body bytes.Buffer
	imports := map[string]bool{}
	for _, name := range append(append([]string(nil), cgoFiles...), genCgoFiles...) {
		f, err := parser.ParseFile(fset, name, sources[name], 0)
		if err != nil {
			return nil, err
		}
		paths := map[string]string{} // import name -> path
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			n := p[strings.LastIndex(p, "/")+1:]
			if im.Name != nil {
				n = im.Name.Name
			}
			paths[n] = p
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() || defined[funcKey(fd)] {
				continue
			}
			if fd.Recv != nil && !ast.IsExported(recvType(fd)) {
				continue
			}
			stub, err := stubOf(fset, fd, paths, imports)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			body.WriteString(stub)
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n\n//go:build !cgo\n\npackage cudalib\n\n", generatedLine)
	if len(imports) > 0 {
		list := make([]string, 0, len(imports))
		for p := range imports {
			list = append(list, strconv.Quote(p))
		}
		sort.Strings(list)
		b.WriteString("import (\n\t" + strings.Join(list, "\n\t") + "\n)\n")
	}
	b.Write(body.Bytes())
	return gofmt("nocgo_gen.go", b.Bytes())
}

// funcKey names a function or method: "Recv.Name" or "Name".
func funcKey(fd *ast.FuncDecl) string {
	if fd.Recv == nil {
		return fd.Name.Name
	}
	return recvType(fd) + "." + fd.Name.Name
}

// recvType is the name of a method's receiver type.
func recvType(fd *ast.FuncDecl) string {
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// stubOf is the stand-in of fd: named results, so that any type has its
// zero value, and err = errNoCgo when the last result is an error.
func stubOf(fset *token.FileSet, fd *ast.FuncDecl, paths map[string]string, imports map[string]bool) (string, error) {
	var bad error
	ast.Inspect(fd.Type, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				if id.Name == "C" {
					bad = fmt.Errorf("%s takes or returns a C type; exported methods use Go types", funcKey(fd))
				} else if p, ok := paths[id.Name]; ok {
					imports[p] = true
				}
			}
		}
		return true
	})
	if bad != nil {
		return "", bad
	}
	typ := &ast.FuncType{Params: fd.Type.Params}
	fails := false
	if fd.Type.Results != nil {
		var fields []*ast.Field
		i := 0
		for _, r := range fd.Type.Results.List {
			n := max(len(r.Names), 1)
			for k := 0; k < n; k++ {
				name := fmt.Sprintf("r%d", i)
				if id, ok := r.Type.(*ast.Ident); ok && id.Name == "error" {
					name, fails = "err", true
				}
				fields = append(fields, &ast.Field{Names: []*ast.Ident{ast.NewIdent(name)}, Type: r.Type})
				i++
			}
		}
		typ.Results = &ast.FieldList{List: fields}
	}
	decl := &ast.FuncDecl{Recv: fd.Recv, Name: fd.Name, Type: typ}
	var sig bytes.Buffer
	if err := printer.Fprint(&sig, fset, decl); err != nil {
		return "", err
	}
	var b strings.Builder
	if fails {
		fmt.Fprintf(&b, "\n// %s fails: the library needs cgo.\n%s {\n\terr = errNoCgo\n\treturn\n}\n", fd.Name.Name, sig.String())
	} else {
		fmt.Fprintf(&b, "\n// %s is the zero value without cgo.\n%s {\n\treturn\n}\n", fd.Name.Name, sig.String())
	}
	return b.String(), nil
}
