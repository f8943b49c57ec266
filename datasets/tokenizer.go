package datasets

import (
	"fmt"
	"strings"
)

// Tokenizer turns text into token ids and back. The text corpus
// (TextOptions.Tokenizer), the tokenize command and the generate command
// take one; NewTokenizer makes the built-in ones. A Tokenizer is safe for
// concurrent use.
type Tokenizer interface {
	// Name is the tokenizer's name, the one NewTokenizer takes ("byte",
	// "gpt2"); it goes into the fingerprint of a corpus file.
	Name() string
	// Vocab is the number of token ids: every id Encode returns, EOT
	// included, is below it.
	Vocab() int
	// EOT is the end-of-text token that starts every document of a corpus,
	// and whether the tokenizer has one.
	EOT() (id int32, ok bool)
	// Encode returns the tokens of text, any bytes, valid UTF-8 or not, so
	// that Decode(Encode(text)) == text. Text that spells a special token
	// ("<|endoftext|>") is encoded as ordinary text: only a caller inserts
	// EOT.
	Encode(text string) []int32
	// Decode returns the text of tokens, EOT included; a token outside
	// [0, Vocab()) is an error.
	Decode(tokens []int32) (string, error)
}

// Names of the built-in tokenizers, as NewTokenizer takes them.
const (
	// ByteTokenizer is byte-level text: one token per byte, vocabulary
	// 256, no EOT. It is what the text corpus has always been.
	ByteTokenizer = "byte"
	// GPT2Tokenizer is GPT-2's byte-level BPE (tiktoken's "gpt2", alias
	// r50k_base): vocabulary 50257, EOT <|endoftext|> = 50256. Its ranks
	// are compiled into the program: it needs no download.
	GPT2Tokenizer = "gpt2"
)

// TokenizerNames are the names NewTokenizer knows, the default first.
var TokenizerNames = []string{ByteTokenizer, GPT2Tokenizer}

// NewTokenizer returns the built-in tokenizer of that name: "byte" or
// "gpt2".
func NewTokenizer(name string) (Tokenizer, error) {
	switch name {
	case ByteTokenizer:
		return byteLevel{}, nil
	case GPT2Tokenizer:
		return newGPT2()
	}
	return nil, fmt.Errorf("tokenizer %q: want %s", name, strings.Join(TokenizerNames, " or "))
}

// isByteLevel reports whether tok is nil or the byte tokenizer: text then
// takes the byte-level path, whose files and windows predate tokenizers.
func isByteLevel(tok Tokenizer) bool {
	return tok == nil || tok.Name() == ByteTokenizer
}

// byteLevel is the byte tokenizer: token i is byte i.
type byteLevel struct{}

func (byteLevel) Name() string { return ByteTokenizer }

func (byteLevel) Vocab() int { return 256 }

func (byteLevel) EOT() (int32, bool) { return 0, false }

func (byteLevel) Encode(text string) []int32 {
	out := make([]int32, len(text))
	for i := 0; i < len(text); i++ {
		out[i] = int32(text[i])
	}
	return out
}

func (byteLevel) Decode(tokens []int32) (string, error) {
	b := make([]byte, len(tokens))
	for i, t := range tokens {
		if t < 0 || t > 255 {
			return "", fmt.Errorf("decode: token %d at position %d is outside the byte tokenizer's vocabulary of 256", t, i)
		}
		b[i] = byte(t)
	}
	return string(b), nil
}

// TokenizerForVocab names the tokenizer whose tokens a model of vocab
// token ids reads, for tools that take text in or print text out: "byte"
// for a vocabulary of 256, "gpt2" for 50257 up to 50304 (GPT-2's, padded to
// a multiple of 64 as the gpt2 models pad it), "" when it is neither.
func TokenizerForVocab(vocab int) string {
	switch {
	case vocab == 256:
		return ByteTokenizer
	case vocab >= gpt2Vocab && vocab <= 50304:
		return GPT2Tokenizer
	}
	return ""
}
