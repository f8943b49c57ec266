package main

import (
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/symddp/symddp/datasets"
)

// streamer writes a sample as its tokens are drawn (models.SampleOptions'
// Emit): token ids comma-separated, or the text of every whole character
// so far, so that a character whose bytes span several tokens waits for
// its last one. Its output is the decoding of the whole sample, written in
// pieces.
type streamer struct {
	w       io.Writer
	tok     datasets.Tokenizer // nil: token ids
	pending []int32            // drawn, not yet written (text only)
	n       int                // tokens drawn
	err     error              // the first write or decode error
}

// emit takes the next token of the sample.
func (s *streamer) emit(t int32) {
	s.n++
	if s.err != nil {
		return
	}
	if s.tok == nil {
		sep := ","
		if s.n == 1 {
			sep = ""
		}
		_, s.err = fmt.Fprintf(s.w, "%s%d", sep, t)
		return
	}
	s.pending = append(s.pending, t)
	raw, err := s.raw(s.pending)
	if err != nil {
		s.err = err
		return
	}
	if wholeCharacters(raw) {
		s.flush()
	}
}

// finish writes what is pending, a character left incomplete included, and
// the line's end; it returns the first error of the stream.
func (s *streamer) finish() error {
	if s.err == nil && len(s.pending) > 0 {
		s.flush()
	}
	if s.err == nil {
		_, s.err = io.WriteString(s.w, "\n")
	}
	return s.err
}

// flush writes the pending tokens' text.
func (s *streamer) flush() {
	text, err := display(s.tok, s.pending)
	if err == nil {
		_, err = io.WriteString(s.w, text)
	}
	s.pending, s.err = s.pending[:0], err
}

// raw is the bytes the tokens stand for.
func (s *streamer) raw(tokens []int32) (string, error) {
	if s.tok.Name() == datasets.ByteTokenizer {
		b := make([]byte, len(tokens))
		for i, t := range tokens {
			b[i] = byte(t)
		}
		return string(b), nil
	}
	return s.tok.Decode(tokens)
}

// wholeCharacters reports whether b does not end inside a UTF-8 character:
// its last character is complete, or its bytes can never become one (they
// are written escaped then, as they would be at the end).
func wholeCharacters(b string) bool {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if utf8.RuneStart(c) {
			return utf8.FullRuneInString(b[len(b)-i:])
		}
	}
	return true // continuation bytes alone: no character can start there
}
