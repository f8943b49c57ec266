package datasets

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sourceTokens returns the tokens of a source with windows of one token:
// all of them.
func sourceTokens(t *testing.T, d *TokenSource) []int32 {
	t.Helper()
	if d.Context() != 1 {
		t.Fatalf("sourceTokens needs a context of 1, not %d", d.Context())
	}
	out := make([]int32, 0, d.Tokens())
	for i := range d.Len() {
		x, y := gatherOne(t, d, i)
		out = append(out, x[0])
		if i == d.Len()-1 {
			out = append(out, y[0])
		}
	}
	return out
}

// documents decodes tokens and splits them at every EOT, which must lead
// them: the texts of the documents.
func documents(t *testing.T, tok Tokenizer, tokens []int32) []string {
	t.Helper()
	eot, _ := tok.EOT()
	if len(tokens) == 0 || tokens[0] != eot {
		t.Fatalf("tokens do not start with EOT %d: %v", eot, tokens[:min(len(tokens), 5)])
	}
	var docs []string
	for _, doc := range splitAt(tokens[1:], eot) {
		text, err := tok.Decode(doc)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, text)
	}
	return docs
}

// splitAt splits s at every sep, dropping the seps.
func splitAt(s []int32, sep int32) [][]int32 {
	var out [][]int32
	for {
		i := slices.Index(s, sep)
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
}

func TestBuildCorpusGPT2(t *testing.T) {
	dir, texts := textTree(t)
	tok := gpt2ForTest(t)
	dst := filepath.Join(t.TempDir(), CorpusFile)
	opts := TextOptions{ValEvery: 3, Tokenizer: tok}
	info, err := BuildCorpus(dst, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Built || info.Files != 8 || info.Binary != 1 || info.TrainFiles != 6 || info.ValFiles != 2 ||
		info.Tokenizer != "gpt2" || info.Vocab != 50257 {
		t.Fatalf("info %+v", info)
	}
	train, val, err := LoadCorpus(dst, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer train.Close()
	defer val.Close()
	if s := train.Spec(); s.Classes != 50257 || !train.Mapped() || int64(train.Tokens()) != info.TrainTokens || int64(val.Tokens()) != info.ValTokens {
		t.Fatalf("Spec %+v, mapped %v, %d and %d tokens; info %+v", s, train.Mapped(), train.Tokens(), val.Tokens(), info)
	}
	// Every file is a document led by <|endoftext|>, in file order; text
	// files 2 and 5 (0-based) are validation data.
	wantTrain := []string{texts[0], texts[1], texts[3], texts[4], texts[6], texts[7]}
	if got := documents(t, tok, sourceTokens(t, train)); !slices.Equal(got, wantTrain) {
		t.Fatalf("training documents %q, want %q", got, wantTrain)
	}
	if got, want := documents(t, tok, sourceTokens(t, val)), []string{texts[2], texts[5]}; !slices.Equal(got, want) {
		t.Fatalf("validation documents %q, want %q", got, want)
	}
	// LoadText makes the same tokens in memory.
	memTrain, memVal, err := LoadText(dir, 1, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sourceTokens(t, memTrain), sourceTokens(t, train)) || !slices.Equal(sourceTokens(t, memVal), sourceTokens(t, val)) {
		t.Fatal("LoadText's tokens differ from the corpus file's")
	}
}

// The corpus file is keyed by its tokenizer: the byte tokenizer named or
// not is the same corpus, gpt2 another.
func TestBuildCorpusRebuildsForAnotherTokenizer(t *testing.T) {
	dir, _ := textTree(t)
	dst := filepath.Join(t.TempDir(), CorpusFile)
	byteTok, _ := NewTokenizer("byte")
	steps := []struct {
		tok   Tokenizer
		built bool
	}{{nil, true}, {byteTok, false}, {gpt2ForTest(t), true}, {gpt2ForTest(t), false}, {nil, true}}
	for i, s := range steps {
		info, err := BuildCorpus(dst, dir, TextOptions{Tokenizer: s.tok})
		if err != nil {
			t.Fatal(err)
		}
		if info.Built != s.built {
			t.Fatalf("step %d (%v): built %v, want %v", i, s.tok, info.Built, s.built)
		}
	}
	train, _, err := LoadCorpus(dst, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer train.Close()
	if train.Vocab() != 256 {
		t.Fatalf("after the last byte-level build the corpus has a vocabulary of %d", train.Vocab())
	}
}

// With fewer text files than ValEvery the last 1/ValEvery of the bytes is
// validation data, as for bytes: the validation part continues the cut
// document, without an EOT.
func TestLoadTextGPT2SmallCorpusFallsBackToTail(t *testing.T) {
	dir := t.TempDir()
	text := strings.Repeat("Hello world. ", 20) // 260 bytes: 65 for validation
	writeFiles(t, dir, map[string][]byte{"one.txt": []byte(text)})
	tok := gpt2ForTest(t)
	train, val, err := LoadText(dir, 1, TextOptions{ValEvery: 4, Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	if got := documents(t, tok, sourceTokens(t, train)); !slices.Equal(got, []string{text[:195]}) {
		t.Fatalf("training documents %q, want the first 195 bytes", got)
	}
	got, err := tok.Decode(sourceTokens(t, val))
	if err != nil || got != text[195:] {
		t.Fatalf("validation part %q, %v; want %q", got, err, text[195:])
	}
}

func TestTokenizeTextIsIndependentOfWorkers(t *testing.T) {
	dir, texts := textTree(t)
	other := t.TempDir()
	writeFiles(t, other, map[string][]byte{"more.txt": []byte("Hello world\n")})
	run := func(workers int) (CorpusInfo, [][]int32, []bool, [][2]int64) {
		var docs [][]int32
		var vals []bool
		var progress [][2]int64
		info, err := TokenizeText([]string{dir, other}, TokenizeOptions{
			TextOptions: TextOptions{ValEvery: 4, Tokenizer: gpt2ForTest(t)},
			Workers:     workers, Verify: true,
			Progress: func(done, total int64) { progress = append(progress, [2]int64{done, total}) },
		}, func(val bool, tokens []int32) error {
			docs = append(docs, slices.Clone(tokens))
			vals = append(vals, val)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return info, docs, vals, progress
	}
	info, docs, vals, progress := run(1)
	_, docs3, vals3, _ := run(3)
	if !slices.EqualFunc(docs, docs3, slices.Equal[[]int32]) || !slices.Equal(vals, vals3) {
		t.Fatal("3 workers emit other tokens than 1")
	}
	want := append(slices.Clone(texts), "Hello world\n")
	if len(docs) != len(want) || info.Files != 9 || info.ValFiles != 2 || !vals[3] || !vals[7] {
		t.Fatalf("%d documents, info %+v, val %v", len(docs), info, vals)
	}
	tok := gpt2ForTest(t)
	var tokens int64
	for i, d := range docs {
		if got := documents(t, tok, d); len(got) != 1 || got[0] != want[i] {
			t.Fatalf("document %d: %q, want %q", i, got, want[i])
		}
		tokens += int64(len(d))
	}
	if last := progress[len(progress)-1]; tokens != info.TrainTokens+info.ValTokens || progress[0][0] != 0 ||
		last[0] != last[1] || last[1] != info.TrainBytes+info.ValBytes || len(progress) != len(docs)+1 {
		t.Fatalf("tokens %d, info %+v, progress %v", tokens, info, progress)
	}
	if !slices.Equal(docs[len(docs)-1], []int32{50256, 15496, 995, 198}) {
		t.Fatalf("the last document, Hello world\\n: %v", docs[len(docs)-1])
	}
}

func TestTokenizeTextErrors(t *testing.T) {
	dir, _ := textTree(t)
	emit := func(bool, []int32) error { return nil }
	if _, err := TokenizeText(nil, TokenizeOptions{}, emit); err == nil || err.Error() != "tokenize: no text file or directory named" {
		t.Fatalf("no paths: %v", err)
	}
	_, err := TokenizeText([]string{dir, filepath.Join(dir, "b")}, TokenizeOptions{}, emit)
	if want := "tokenize: " + filepath.Join(dir, "b", "c.go") + " is both in " + dir + " and in " + filepath.Join(dir, "b") + ": name each file once"; err == nil || err.Error() != want {
		t.Fatalf("overlapping paths: %v\nwant %s", err, want)
	}
	_, err = TokenizeText([]string{dir}, TokenizeOptions{}, func(bool, []int32) error { return os.ErrPermission })
	if err == nil || err.Error() != "tokenize: permission denied" {
		t.Fatalf("emit's error: %v", err)
	}
}

func TestLoadTokenCorpusErrors(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, CorpusFile)
	src := writeText(t, dir, "src.txt", strings.Repeat("Hello world\n", 50))
	info, err := BuildCorpus(dst, src, TextOptions{Tokenizer: gpt2ForTest(t)})
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, good[:len(good)-2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadCorpus(dst, 4)
	want := fmt.Sprintf("load corpus %s: header declares %d training and %d validation tokens of 2 bytes but the file holds %d bytes after the header (truncated?)",
		dst, info.TrainTokens, info.ValTokens, 2*(info.TrainTokens+info.ValTokens)-2)
	if err == nil || err.Error() != want {
		t.Fatalf("truncated: %v\nwant %s", err, want)
	}
}
