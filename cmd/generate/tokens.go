package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/symddp/symddp/datasets"
)

// chooseTokenizer returns the tokenizer of --tokenizer for a model with
// vocab tokens, or nil for token ids in and out: auto is byte for a
// vocabulary of 256, gpt2 for 50257 to 50304 (GPT-2's, padded as the gpt2
// preset pads it), none otherwise.
func chooseTokenizer(name string, vocab int) (datasets.Tokenizer, error) {
	if name == "auto" {
		if name = datasets.TokenizerForVocab(vocab); name == "" {
			name = "none"
		}
	}
	if name == "none" {
		return nil, nil
	}
	tok, err := datasets.NewTokenizer(name)
	if err != nil {
		return nil, fmt.Errorf("--tokenizer: %w", err)
	}
	if tok.Vocab() > vocab {
		return nil, fmt.Errorf("--tokenizer %s has %d tokens, more than the model's vocabulary of %d", name, tok.Vocab(), vocab)
	}
	return tok, nil
}

// drawVocab is the number of tokens to draw from: the tokenizer's (GPT-2's
// 50257 for the gpt2 preset's padded 50304: the padding ids are never
// drawn and every draw decodes), or 0 (all of the model's) without one.
func drawVocab(tok datasets.Tokenizer, vocab int) int {
	if tok != nil && tok.Vocab() < vocab {
		return tok.Vocab()
	}
	return 0
}

// promptOf turns the prompt flags into tokens and the text to print before
// the sample: --prompt-tokens as given (printed decoded, or not at all
// without a tokenizer); --prompt encoded by the tokenizer, after the
// tokenizer's EOT, since every document of a tokenized corpus starts with
// it; no --prompt: "\n" for a byte-level model, EOT alone (a new document)
// for one with an EOT.
func promptOf(o *options, tok datasets.Tokenizer, vocab int) (tokens []int32, shown string, err error) {
	if o.promptTokens != "" {
		for _, f := range strings.Split(o.promptTokens, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v < 0 || v >= vocab {
				return nil, "", fmt.Errorf("--prompt-tokens: %q is not a token id in [0, %d)", f, vocab)
			}
			tokens = append(tokens, int32(v))
		}
		if tok != nil {
			if shown, err = display(tok, tokens); err != nil {
				return nil, "", fmt.Errorf("--prompt-tokens: %w", err)
			}
		}
		return tokens, shown, nil
	}
	if tok == nil && o.tokenizer == "none" {
		return nil, "", errors.New("--tokenizer none: give the prompt as --prompt-tokens")
	}
	if tok == nil {
		return nil, "", fmt.Errorf("the model's vocabulary of %d tokens is neither bytes nor GPT-2's: give --prompt-tokens, or --tokenizer", vocab)
	}
	text := o.prompt
	switch {
	case o.promptSet && text == "":
		return nil, "", errors.New("--prompt is empty: give it some text, or leave it out to start from a newline (a byte-level model) or a new document (GPT-2's vocabulary)")
	case !o.promptSet && tok.Name() == datasets.ByteTokenizer:
		text = "\n"
	}
	body := tok.Encode(text)
	if shown, err = display(tok, body); err != nil {
		return nil, "", err
	}
	if eot, ok := tok.EOT(); ok {
		tokens = append(tokens, eot)
	}
	return append(tokens, body...), shown, nil
}

// display is tokens as text to print: a byte-level model's bytes with
// control characters and invalid UTF-8 escaped (datasets.DecodeBytes),
// other tokenizers' decoded text as it is.
func display(tok datasets.Tokenizer, tokens []int32) (string, error) {
	if tok.Name() == datasets.ByteTokenizer {
		return datasets.DecodeBytes(tokens), nil
	}
	return tok.Decode(tokens)
}
