package datasets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// textTree writes a directory of text and other files and returns it and
// the text its corpus holds in file order.
func textTree(t *testing.T) (dir string, texts []string) {
	t.Helper()
	dir = t.TempDir()
	lateNUL := strings.Repeat("x", binaryProbe) + "\x00 NUL past the probe"
	writeFiles(t, dir, map[string][]byte{
		"a.txt":          []byte("alpha\n"),
		"b/c.go":         []byte("package c\n"),
		"b/d/e.md":       []byte("# e\n"),
		"b/.hidden":      []byte("hidden\n"),
		".git/config":    []byte("[core]\n"),
		"bin.dat":        append(bytes.Repeat([]byte("ab"), 50), 0, 1, 2),
		"empty.txt":      {},
		"late.txt":       []byte(lateNUL),
		"z/last.txt":     []byte("omega\n"),
		"b/d/f.txt":      []byte("\xff\xfe latin-1 bytes are text too\n"),
		"b.go":           []byte("package b\n"),
		"b/d/g/h/i.text": []byte("deep\n"),
	})
	if err := os.Symlink(filepath.Join(dir, "a.txt"), filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	// WalkDir order: each directory's names sorted ("b" < "b.go"), depth first.
	texts = []string{"alpha\n", "package c\n", "# e\n", "\xff\xfe latin-1 bytes are text too\n", "deep\n",
		"package b\n", lateNUL, "omega\n"}
	return dir, texts
}

func sourceBytes(t *testing.T, d *TokenSource) []byte {
	t.Helper()
	// Windows overlap by one token: window i's inputs and its last target
	// rebuild the tokens of all windows.
	var out []byte
	for i := range d.Len() {
		x, y := gatherOne(t, d, i)
		for _, v := range x {
			out = append(out, byte(v))
		}
		if i == d.Len()-1 {
			out = append(out, byte(y[len(y)-1]))
		}
	}
	return out
}

func TestLoadTextSplitsEveryKthFile(t *testing.T) {
	dir, texts := textTree(t)
	train, val, err := LoadText(dir, 1, TextOptions{ValEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Text files 2 and 5 (0-based) of 8 are validation data.
	wantTrain := texts[0] + texts[1] + texts[3] + texts[4] + texts[6] + texts[7]
	wantVal := texts[2] + texts[5]
	if got := string(sourceBytes(t, train)); got != wantTrain {
		t.Fatalf("training part %q..., want %q...", got[:min(len(got), 60)], wantTrain[:60])
	}
	if got := string(sourceBytes(t, val)); got != wantVal {
		t.Fatalf("validation part %q, want %q", got, wantVal)
	}
	if s := train.Spec(); s.Classes != 256 || !s.Tokens || s.Targets != 1 || train.Mapped() {
		t.Fatalf("Spec %+v Mapped %v", s, train.Mapped())
	}
}

func TestLoadTextSmallCorpusFallsBackToTail(t *testing.T) {
	dir := t.TempDir()
	text := strings.Repeat("0123456789", 10)
	writeFiles(t, dir, map[string][]byte{"one.txt": []byte(text)})
	for _, path := range []string{dir, filepath.Join(dir, "one.txt")} {
		train, val, err := LoadText(path, 4, TextOptions{ValEvery: 4})
		if err != nil {
			t.Fatal(err)
		}
		// 100 bytes: the last 25 are validation data, windows of 5 bytes.
		if got := string(sourceBytes(t, train)); got != text[:73] {
			t.Fatalf("%s: training windows cover %q, want %q", path, got, text[:73])
		}
		if got := string(sourceBytes(t, val)); got != text[75:] {
			t.Fatalf("%s: validation windows cover %q, want %q", path, got, text[75:])
		}
	}
}

func TestLoadTextCap(t *testing.T) {
	dir, texts := textTree(t)
	// 6+10+4 bytes of the first three files, then 3 bytes of the fourth.
	train, val, err := LoadText(dir, 1, TextOptions{MaxBytes: 23, ValEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(sourceBytes(t, train)), texts[0]+texts[2]; got != want {
		t.Fatalf("training part %q, want %q", got, want)
	}
	if got, want := string(sourceBytes(t, val)), texts[1]+texts[3][:3]; got != want {
		t.Fatalf("validation part %q, want %q", got, want)
	}
}

// Symbolic links are followed, to files and to directories (a Hugging
// Face snapshot is links to blobs), their files listed under the link's
// name; a broken link, a loop and a second name for a file already listed
// are left out. The text behind links was skipped without a word.
func TestListTextFilesFollowsLinks(t *testing.T) {
	outside := t.TempDir()
	writeFiles(t, outside, map[string][]byte{"books/a.txt": []byte("a\n"), "books/b.txt": []byte("b\n"), "one.txt": []byte("1\n")})
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"own.txt": []byte("own\n")})
	for link, target := range map[string]string{
		"books":   filepath.Join(outside, "books"),
		"one.txt": filepath.Join(outside, "one.txt"),
		"twice":   filepath.Join(dir, "own.txt"), // own.txt again
		"loop":    dir,
		"broken":  filepath.Join(outside, "nothing"),
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	root, files, err := listTextFiles(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, strings.TrimPrefix(f.path, root+"/"))
	}
	if want := "books/a.txt books/b.txt one.txt own.txt"; strings.Join(got, " ") != want {
		t.Errorf("listed %q, want %q", strings.Join(got, " "), want)
	}
}

func TestLoadTextErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"x.bin": {1, 0, 2}, "tiny.txt": []byte("ab")})
	binOnly := filepath.Join(dir, "x.bin")
	cases := []struct {
		name    string
		path    string
		context int
		opts    TextOptions
		want    string
	}{
		{"binary only", binOnly, 4, TextOptions{}, "load text: text corpus: no text files in DIR/x.bin (1 binary file skipped)"},
		{"missing", filepath.Join(dir, "nope"), 4, TextOptions{}, "load text: text corpus: lstat DIR/nope: no such file or directory"},
		{"too small", filepath.Join(dir, "tiny.txt"), 4, TextOptions{},
			"load text DIR/tiny.txt: training part (0 files, 2 bytes): 2 tokens in 1 stream holds no window of 5 tokens: use more data or a shorter context"},
		{"cap", dir, 4, TextOptions{MaxBytes: -1}, "load text: text corpus cap of -1 bytes: must be 0 (none) or positive"},
		{"every", dir, 4, TextOptions{ValEvery: 1}, "load text: text corpus: validation every 1 files: want 2 or more"},
		{"context", dir, 0, TextOptions{}, "load text: context of 0 tokens: must be positive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := LoadText(c.path, c.context, c.opts)
			if want := strings.ReplaceAll(c.want, "DIR", dir); err == nil || err.Error() != want {
				t.Fatalf("error\n  %v\nwant\n  %s", err, want)
			}
		})
	}
}

func TestFindGoSource(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string][]byte{"src/runtime/x.go": []byte("package runtime\n")})
	noSrc := t.TempDir()
	goEnv := func(s string, err error) func() (string, error) { return func() (string, error) { return s, err } }
	cases := []struct {
		name    string
		env     string
		goEnv   func() (string, error)
		builtIn string
		want    string
		err     string
	}{
		{"env first", root, goEnv(noSrc, nil), "", root + "/src", ""},
		{"go env next", noSrc, goEnv(root, nil), "", root + "/src", ""},
		{"built in last", "", goEnv("", errors.New(`exec: "go": executable file not found in $PATH`)), root, root + "/src", ""},
		{"none", noSrc, goEnv("", errors.New(`exec: "go": executable file not found in $PATH`)), "", "",
			"no Go source tree for the default text corpus ($GOROOT is " + noSrc + ", which has no src directory; " +
				"`go env GOROOT` failed (exec: \"go\": executable file not found in $PATH); runtime.GOROOT() is empty): " +
				"name a file or directory of text as the data directory, or install Go and set $GOROOT to it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := findGoSource(c.env, c.goEnv, c.builtIn)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("error\n  %v\nwant\n  %s", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestLoadTextGoTree reads the first MiB of the default corpus, Go's own
// source tree.
func TestLoadTextGoTree(t *testing.T) {
	if _, err := DefaultTextDir(); err != nil {
		t.Skip(err)
	}
	train, val, err := LoadText("", 128, TextOptions{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	total := train.Tokens() + val.Tokens()
	if total != 1<<20 || val.Tokens() < total/50 || val.Tokens() > total/5 {
		t.Fatalf("%d training and %d validation bytes: want 1 MiB in all, 2 to 20%% validation", train.Tokens(), val.Tokens())
	}
	if !bytes.Contains(sourceBytes(t, train), []byte("package ")) {
		t.Fatalf("the training part holds no Go package clause")
	}
}
