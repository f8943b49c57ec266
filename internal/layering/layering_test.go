package layering

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/symddp/symddp/"

// deps lists the packages pkg depends on (go list -deps).
func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	m := map[string]bool{}
	for _, l := range strings.Fields(string(out)) {
		m[strings.TrimPrefix(l, module)] = true
	}
	return m
}

// TestPackageLayers: a package of a lower layer imports none of a higher
// one, directly or not.
func TestPackageLayers(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	for _, c := range []struct {
		pkg       string
		forbidden []string
	}{
		{"compute", []string{"optim", "models", "ddp", "ddp/devicestep", "comm", "datasets", "compute/cuda", "internal/cudalib"}},
		{"models", []string{"ddp", "optim", "comm", "compute/cuda", "traincmd"}},
		{"models/layertest", []string{"ddp", "optim", "comm", "compute/cuda", "traincmd"}},
		{"optim", []string{"compute", "models", "ddp", "comm"}},
		{"ddp", []string{"compute/cuda", "internal/cudalib", "comm/nvshmem", "traincmd"}},
		{"ddp/devicestep", []string{"ddp", "models", "comm"}},
	} {
		d := deps(t, c.pkg)
		for _, f := range c.forbidden {
			if d[f] {
				t.Errorf("%s depends on %s", c.pkg, f)
			}
		}
	}
}

// modelType is a concrete model type of package models named in code (a
// type assertion or switch, a parameter): the commands reach models
// through the interfaces models.Model and those of models/describe.go.
var modelType = regexp.MustCompile(`models\.(GPT|Llama|Decoder|MLP|Classifier)\b`)

// TestCommandsKnowNoModelType: no source file of the train command
// (traincmd) or of cmd/ names a concrete model type, so that a model
// registered by a library user gets what the built-in ones get.
func TestCommandsKnowNoModelType(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, dir := range []string{"traincmd", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, l := range strings.Split(string(b), "\n") {
				if modelType.MatchString(l) {
					t.Errorf("%s:%d names a model type: %s", path, i+1, strings.TrimSpace(l))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
