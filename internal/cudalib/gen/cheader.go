package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A header is what the generator reads of one C header of the ABI: its entry
// points in order and the ABI version it defines.
type header struct {
	path    string // relative to the module root, e.g. cuda/symddp_compute.h
	version string // the name of its *_ABI_VERSION macro ("" if none)
	abi     int    // its value
	funcs   []cfunc
}

// A cfunc is one entry point: int name(params); or const char *name(void).
type cfunc struct {
	name   string
	ret    string   // "int" or "const char *"
	params []cparam // none for (void)
	doc    []string // the lines of the comment right above it (or above its group)
	header string   // the header's path
}

// A cparam is one parameter: its C type as written (without the name) and
// its parts.
type cparam struct {
	name   string
	ctype  string // e.g. "const sdc_ctx *"
	base   string // the type without const and stars: "sdc_ctx"
	isCon  bool   // declared const
	stars  int    // levels of pointer
	origin string // the declaration as written, for messages
}

var (
	reDecl = regexp.MustCompile(`^(int|const char \*)\s*([a-z][a-z0-9_]*)\s*\(`)
	// reFuncLike is any declaration of a function at the start of a line,
	// to refuse an entry point whose return type reDecl does not take.
	reFuncLike = regexp.MustCompile(`^[a-z][a-z0-9_ ]*[ *]([a-z][a-z0-9_]*)\s*\(`)
	reVersion  = regexp.MustCompile(`^#define\s+([A-Z0-9_]+_ABI_VERSION)\s+([0-9]+)\s*$`)
	reParam    = regexp.MustCompile(`^(const\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(\**)\s*([A-Za-z_][A-Za-z0-9_]*)$`)
)

// parseHeader reads the entry points of a header whose names start with
// prefix. Declarations are what the header's own conventions make them:
// at the start of a line, returning int (or const char * for the error
// message), ending with ");" possibly on a later line. The comment directly
// above a declaration, or above the run of declarations it belongs to, is
// its doc.
func parseHeader(path, src, prefix string) (*header, error) {
	h := &header{path: path}
	lines := strings.Split(src, "\n")
	var doc []string // the last comment block, while it still applies
	inComment := false
	var comment []string
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], " \t\r")
		trim := strings.TrimSpace(line)
		if inComment {
			comment = append(comment, line)
			if strings.Contains(trim, "*/") {
				inComment = false
				doc = commentText(comment)
			}
			continue
		}
		if strings.HasPrefix(trim, "/*") {
			comment = []string{line}
			if strings.Contains(trim, "*/") {
				doc = commentText(comment)
			} else {
				inComment = true
			}
			continue
		}
		if m := reVersion.FindStringSubmatch(trim); m != nil {
			h.version = m[1]
			h.abi, _ = strconv.Atoi(m[2])
			doc = nil
			continue
		}
		m := reDecl.FindStringSubmatch(line)
		if m == nil {
			if f := reFuncLike.FindStringSubmatch(trim); f != nil && strings.HasPrefix(f[1], prefix) {
				return nil, fmt.Errorf("%s: %s: a return type the generator does not know (int, const char *): %q",
					path, f[1], trim)
			}
		}
		if m == nil || !strings.HasPrefix(m[2], prefix) {
			if trim == "" || !strings.HasPrefix(trim, "int ") {
				doc = nil // a blank line or other code ends a comment's reach
			}
			continue
		}
		// Gather the declaration up to its ";".
		decl := line
		for !strings.Contains(decl, ";") && i+1 < len(lines) {
			i++
			decl += " " + strings.TrimSpace(lines[i])
		}
		f, err := parseDecl(decl, m[1], m[2])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		f.doc, f.header = doc, path
		h.funcs = append(h.funcs, f)
	}
	if len(h.funcs) == 0 {
		return nil, fmt.Errorf("%s: no entry points named %s*", path, prefix)
	}
	return h, nil
}

// commentText is the text of a block comment, one string a line, without
// the comment marks and the leading " * ".
func commentText(lines []string) []string {
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		t = strings.TrimPrefix(t, "/*")
		t = strings.TrimSuffix(t, "*/")
		t = strings.TrimSpace(t)
		if strings.HasPrefix(t, "* ") || t == "*" {
			t = strings.TrimSpace(t[1:])
		}
		if t != "" || len(out) > 0 {
			out = append(out, t)
		}
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// parseDecl parses "ret name(params);" into a cfunc.
func parseDecl(decl, ret, name string) (cfunc, error) {
	f := cfunc{name: name, ret: ret}
	open, close := strings.Index(decl, "("), strings.LastIndex(decl, ")")
	if open < 0 || close < open {
		return f, fmt.Errorf("%s: cannot read the declaration %q", name, decl)
	}
	list := strings.TrimSpace(decl[open+1 : close])
	if list == "void" {
		return f, nil
	}
	for _, p := range strings.Split(list, ",") {
		p = strings.Join(strings.Fields(p), " ")
		m := reParam.FindStringSubmatch(p)
		if m == nil {
			return f, fmt.Errorf("%s: cannot read the parameter %q (one type and a name each)", name, p)
		}
		cp := cparam{name: m[4], base: m[2], isCon: m[1] != "", stars: len(m[3]), origin: p}
		cp.ctype = m[2]
		if cp.isCon {
			cp.ctype = "const " + cp.ctype
		}
		if cp.stars > 0 {
			cp.ctype += " " + m[3]
		}
		f.params = append(f.params, cp)
	}
	return f, nil
}

// decl is the parameter as a C declaration with the given name.
func (p cparam) decl(name string) string {
	if p.stars > 0 {
		return p.ctype + name
	}
	return p.ctype + " " + name
}
