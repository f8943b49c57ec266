package settings

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// moduleRoot is the nearest directory above this package's that holds go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

var (
	nameRE  = regexp.MustCompile(`SYMDDP_[A-Z0-9_]*[A-Z0-9]`)
	constRE = regexp.MustCompile(`(?m)^\t(\w+)\s*=\s*"(SYMDDP_\w+)"$`)
	useRE   = regexp.MustCompile(`settings\.(\w+)`)
)

// constNames maps the table's Go constants (settings.BLAS) to the names
// they stand for.
func constNames(t *testing.T, root string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "internal", "settings", "settings.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, c := range constRE.FindAllSubmatch(b, -1) {
		m[string(c[1])] = string(c[2])
	}
	if len(m) == 0 {
		t.Fatal("found no name constants in settings.go")
	}
	return m
}

// sourceNames maps every SYMDDP_ name in the repository's Go, C, CUDA and
// shell sources to a file that uses it, by its name or (Go) by its constant
// in this package; C header guards (#ifndef, #define, #endif lines of names
// ending in _H) are not variables.
func sourceNames(t *testing.T, root string) map[string]string {
	t.Helper()
	consts := constNames(t, root)
	names := map[string]string{}
	exts := []string{".go", ".c", ".h", ".cu", ".cuh", ".sh"}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !slices.Contains(exts, filepath.Ext(path)) || filepath.Dir(path) == filepath.Join(root, "internal", "settings") {
			return nil // the table itself, and these tests' made-up names
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		rel, _ := filepath.Rel(root, path)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			for _, n := range nameRE.FindAllString(line, -1) {
				guard := strings.HasSuffix(n, "_H") && (strings.HasPrefix(line, "#ifndef") || strings.HasPrefix(line, "#define") || strings.HasPrefix(line, "#endif"))
				if !guard && names[n] == "" {
					names[n] = rel
				}
			}
			for _, u := range useRE.FindAllStringSubmatch(line, -1) {
				if n := consts[u[1]]; n != "" && names[n] == "" {
					names[n] = rel
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestEveryVariableDeclared fails for a SYMDDP_ variable that a source file
// uses and the table does not declare, and for a declared one that no
// source uses any more.
func TestEveryVariableDeclared(t *testing.T) {
	names := sourceNames(t, moduleRoot(t))
	for n, file := range names {
		if !Declared(n) {
			t.Errorf("%s (used in %s) is not declared in internal/settings: add it to the table", n, file)
		}
	}
	for _, v := range All() {
		if names[v.Name] == "" {
			t.Errorf("%s is declared but no source uses it: remove it from the table", v.Name)
		}
		if v.Meaning == "" || v.Reader < PE || v.Reader > Test {
			t.Errorf("%s: declared without a meaning or reader", v.Name)
		}
	}
}

// TestGoReadsThroughSettings fails for production Go code (tests may set
// and read what they like) that reads a SYMDDP_ variable by its literal
// name with os.Getenv or os.LookupEnv instead of through this package.
func TestGoReadsThroughSettings(t *testing.T) {
	root := moduleRoot(t)
	direct := regexp.MustCompile(`os\.(?:Getenv|LookupEnv)\("(SYMDDP_[A-Z0-9_]+)"`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".go" || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range direct.FindAllSubmatch(b, -1) {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s reads %s with the os package: use settings.Get or settings.Lookup", rel, m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLookupRefusesUndeclared(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "SYMDDP_NO_SUCH is not declared") {
			t.Errorf("Lookup of an undeclared name: recovered %v, want a panic naming it", r)
		}
	}()
	Lookup("SYMDDP_NO_SUCH")
}

func TestGet(t *testing.T) {
	t.Setenv(BLAS, "gonum")
	if got := Get(BLAS); got != "gonum" {
		t.Errorf("Get(%s) = %q, want gonum", BLAS, got)
	}
	if v, ok := Lookup(Vec); ok && os.Getenv(Vec) != v {
		t.Errorf("Lookup(%s) = %q, environment %q", Vec, v, os.Getenv(Vec))
	}
}

func TestWriteHelp(t *testing.T) {
	t.Setenv(DesyncCheck, "off")
	var b strings.Builder
	if err := WriteHelp(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, v := range All() {
		if !strings.Contains(out, "  "+v.Name+" ") {
			t.Errorf("help does not list %s", v.Name)
		}
	}
	for _, want := range []string{
		"Read by the CUDA library (libsymddp_cuda.so), passed on to the PEs:\n",
		"[default on; now \"off\"]\n",
		"the CPU engine's GEMMs: auto, openblas or gonum [default auto]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

// TestEnvDoc checks that docs/ENV.md lists every declared variable.
func TestEnvDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "ENV.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range All() {
		if !strings.Contains(string(b), "| `"+v.Name+"` |") {
			t.Errorf("docs/ENV.md has no row for %s", v.Name)
		}
	}
}
