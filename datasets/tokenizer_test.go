package datasets

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func gpt2ForTest(t testing.TB) Tokenizer {
	t.Helper()
	tok, err := NewTokenizer(GPT2Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// GPT-2 token ids written down by others, each with where it comes from.
var gpt2References = []struct {
	text   string
	tokens []int32
	source string
}{
	{"Hello world", []int32{15496, 995}, "symddp issue 40"},
	// openai/tiktoken tests/test_encoding.py, test_simple and
	// test_encode_empty (encoding "gpt2" and "r50k_base").
	{"hello world", []int32{31373, 995}, "tiktoken test_simple"},
	{"", []int32{}, "tiktoken test_encode_empty"},
	// tiktoken's test_simple_repeated: how BPE merges runs of zeros.
	{"0", []int32{15}, "tiktoken test_simple_repeated"},
	{"00", []int32{405}, "tiktoken test_simple_repeated"},
	{"000", []int32{830}, "tiktoken test_simple_repeated"},
	{"0000", []int32{2388}, "tiktoken test_simple_repeated"},
	{"00000", []int32{20483}, "tiktoken test_simple_repeated"},
	{"000000", []int32{10535}, "tiktoken test_simple_repeated"},
	{"0000000", []int32{24598}, "tiktoken test_simple_repeated"},
	{"00000000", []int32{8269}, "tiktoken test_simple_repeated"},
	{"000000000", []int32{10535, 830}, "tiktoken test_simple_repeated"},
	{"0000000000", []int32{8269, 405}, "tiktoken test_simple_repeated"},
	{"00000000000", []int32{8269, 830}, "tiktoken test_simple_repeated"},
	{"000000000000", []int32{8269, 2388}, "tiktoken test_simple_repeated"},
	{"0000000000000", []int32{8269, 20483}, "tiktoken test_simple_repeated"},
	{"00000000000000", []int32{8269, 10535}, "tiktoken test_simple_repeated"},
	{"000000000000000", []int32{8269, 24598}, "tiktoken test_simple_repeated"},
	{"0000000000000000", []int32{25645}, "tiktoken test_simple_repeated"},
	{"00000000000000000", []int32{8269, 10535, 830}, "tiktoken test_simple_repeated"},
	// huggingface/transformers tests/models/gpt2/test_modeling_gpt2.py,
	// _test_lm_generate_gpt2_helper: "The dog" and GPT-2's greedy
	// continuation, ids and text both in the test.
	{"The dog", []int32{464, 3290}, "transformers test_lm_generate_gpt2"},
	{"The dog was found in a field near the intersection of West and West Streets.\n\nThe dog",
		[]int32{464, 3290, 373, 1043, 287, 257, 2214, 1474, 262, 16246, 286, 2688, 290, 2688, 27262, 13, 198, 198, 464, 3290},
		"transformers test_lm_generate_gpt2"},
}

func TestGPT2MatchesReferenceTokens(t *testing.T) {
	tok := gpt2ForTest(t)
	for _, r := range gpt2References {
		if got := tok.Encode(r.text); !slices.Equal(got, r.tokens) {
			t.Errorf("Encode(%q) = %v, want %v (%s)", r.text, got, r.tokens, r.source)
		}
		if got, err := tok.Decode(r.tokens); err != nil || got != r.text {
			t.Errorf("Decode(%v) = %q, %v; want %q (%s)", r.tokens, got, err, r.text, r.source)
		}
	}
}

// <|endoftext|> is 50256, only a caller puts it in (as llm.c's data scripts
// do, before every document), and it decodes to its text. tiktoken's
// test_simple encodes "hello <|endoftext|>" with the special token allowed
// as [31373, 220, 50256].
func TestGPT2EndOfText(t *testing.T) {
	tok := gpt2ForTest(t)
	if id, ok := tok.EOT(); id != 50256 || !ok || tok.Vocab() != 50257 || tok.Name() != "gpt2" {
		t.Fatalf("EOT %d %v, vocabulary %d, name %q: want 50256 true 50257 gpt2", id, ok, tok.Vocab(), tok.Name())
	}
	doc := append(tok.Encode("hello "), 50256)
	if want := []int32{31373, 220, 50256}; !slices.Equal(doc, want) {
		t.Fatalf("hello + EOT = %v, want %v", doc, want)
	}
	if got, err := tok.Decode(doc); err != nil || got != "hello <|endoftext|>" {
		t.Fatalf("Decode(%v) = %q, %v", doc, got, err)
	}
	// Text that spells the special token is ordinary text: a document
	// cannot end itself early.
	spelled := tok.Encode("a<|endoftext|>b")
	if slices.Contains(spelled, 50256) || len(spelled) < 3 {
		t.Fatalf("Encode of the spelled special token = %v: want ordinary tokens, no 50256", spelled)
	}
	if got, _ := tok.Decode(spelled); got != "a<|endoftext|>b" {
		t.Fatalf("round trip of the spelled special token: %q", got)
	}
	for _, bad := range [][]int32{{50257}, {-1}, {15496, 50303}} {
		if _, err := tok.Decode(bad); err == nil || !strings.Contains(err.Error(), "outside GPT-2's vocabulary of 50257") {
			t.Errorf("Decode(%v): error %v, want one naming the vocabulary", bad, err)
		}
	}
}

// GPT-2's first 256 ids are its single bytes (openai/gpt-2 src/encoder.py,
// bytes_to_unicode): the printable ones '!'..'~', '¡'..'¬', '®'..'ÿ' in
// byte order take ids 0..187, the others (0x00..0x20, 0x7f..0xa0, 0xad)
// 188..255. A byte outside valid UTF-8 is encoded as its own token.
func TestGPT2InvalidUTF8IsSingleByteTokens(t *testing.T) {
	tok := gpt2ForTest(t)
	g := tok.(*gpt2BPE)
	for _, c := range []struct {
		b  byte
		id int32
	}{{'!', 0}, {'a', 64}, {'~', 93}, {0xa1, 94}, {0xff, 187}, {0x00, 188}, {'\n', 198}, {' ', 220}, {0xad, 255}} {
		if g.byteToken[c.b] != c.id {
			t.Errorf("byte 0x%02x: token %d, want %d", c.b, g.byteToken[c.b], c.id)
		}
	}
	a, b := tok.Encode("a"), tok.Encode("b")
	for _, c := range []struct {
		text string
		want []int32
	}{
		{"a\xffb", slices.Concat(a, []int32{187}, b)},
		{"\xe2\x82", []int32{g.byteToken[0xe2], g.byteToken[0x82]}},                        // a cut-off euro sign
		{"\xed\xa0\x80", []int32{g.byteToken[0xed], g.byteToken[0xa0], g.byteToken[0x80]}}, // a UTF-16 surrogate
	} {
		if got := tok.Encode(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
		if got, err := tok.Decode(tok.Encode(c.text)); err != nil || got != c.text {
			t.Errorf("round trip of %q: %q, %v", c.text, got, err)
		}
	}
}

// DEL (0x7f, GPT-2's token 221) is one of the pattern's "other" characters
// and merges with no byte: the codec alone drops it (see delByte). The
// expected ids follow GPT-2's rules: "a  \x7fb" is the pieces "a", " ",
// " \x7f", "b"; "!\x7f!" is one piece whose bytes do not merge.
func TestGPT2KeepsDEL(t *testing.T) {
	tok := gpt2ForTest(t)
	for _, c := range []struct {
		text string
		want []int32
	}{
		{"\x7f", []int32{221}},
		{"x\x7fy", []int32{87, 221, 88}},
		{"a  \x7fb", []int32{64, 220, 220, 221, 65}},
		{"!\x7f!", []int32{0, 221, 0}},
		{"\x01\x7f\x01", []int32{189, 221, 189}}, // the stand-in itself stays
		{"\x7f\x7f hello", slices.Concat([]int32{221, 221}, tok.Encode(" hello"))},
	} {
		if got := tok.Encode(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
		if got, err := tok.Decode(tok.Encode(c.text)); err != nil || got != c.text {
			t.Errorf("round trip of %q: %q, %v", c.text, got, err)
		}
	}
}

func TestByteTokenizer(t *testing.T) {
	tok, err := NewTokenizer("byte")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tok.EOT(); ok || tok.Vocab() != 256 || tok.Name() != "byte" {
		t.Fatalf("byte tokenizer: EOT %v, vocabulary %d, name %q", ok, tok.Vocab(), tok.Name())
	}
	text := "a\xff\x00é"
	if got := tok.Encode(text); !slices.Equal(got, []int32{'a', 0xff, 0, 0xc3, 0xa9}) {
		t.Fatalf("Encode(%q) = %v", text, got)
	}
	if got, err := tok.Decode(tok.Encode(text)); err != nil || got != text {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	if _, err := tok.Decode([]int32{97, 256}); err == nil || !strings.Contains(err.Error(), "token 256 at position 1") {
		t.Fatalf("Decode of 256: %v", err)
	}
	if _, err := NewTokenizer("gpt4"); err == nil || err.Error() != `tokenizer "gpt4": want byte or gpt2` {
		t.Fatalf("NewTokenizer(gpt4): %v", err)
	}
}

// Decode(Encode(x)) == x over Go's source tree: every file that is not
// valid UTF-8, and a fixed sample of one text file in 16 of the rest (the
// whole tree, about 110 MB, takes about a minute of this test machine's two
// cores; `tokenize --verify $(go env GOROOT)/src` checks all of it).
func TestGPT2RoundTripGoSourceTree(t *testing.T) {
	if testing.Short() {
		t.Skip("reads Go's source tree")
	}
	src, err := DefaultTextDir()
	if err != nil {
		t.Skip(err)
	}
	tok := gpt2ForTest(t)
	_, files, err := listTextFiles(src, "")
	if err != nil {
		t.Fatal(err)
	}
	var checked, invalid, bytes, tokens int
	for i, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 || slices.Contains(data[:min(len(data), binaryProbe)], 0) {
			continue
		}
		valid := utf8.Valid(data)
		if valid && i%16 != 0 {
			continue
		}
		ids := tok.Encode(string(data))
		back, err := tok.Decode(ids)
		if err != nil || back != string(data) {
			rel, _ := filepath.Rel(src, f.path)
			t.Fatalf("%s: decode(encode(x)) differs from x (%d bytes, %d tokens, %v)", rel, len(data), len(ids), err)
		}
		checked++
		bytes += len(data)
		tokens += len(ids)
		if !valid {
			invalid++
		}
	}
	if invalid == 0 || checked < 100 {
		t.Fatalf("checked %d files, %d of them not valid UTF-8: the sample is too small to mean anything", checked, invalid)
	}
	t.Logf("round trip of %d files of %s (%d not valid UTF-8): %d bytes, %d tokens", checked, src, invalid, bytes, tokens)
}
