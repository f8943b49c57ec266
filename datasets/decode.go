package datasets

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DecodeBytes turns byte-level tokens (LoadText, LoadCorpus) into text for a
// person to read, such as a generate command's samples: printable UTF-8,
// newlines and tabs stay as they are; every other byte (control characters,
// bytes that are not valid UTF-8) is written \xNN, and a token outside
// [0, 256) <N>. It is for display: QuoteBytes gives a form that can be read
// back.
func DecodeBytes(tokens []int32) string {
	raw := make([]byte, 0, len(tokens))
	var sb strings.Builder
	sb.Grow(len(tokens))
	flush := func() {
		for s := raw; len(s) > 0; {
			r, size := utf8.DecodeRune(s)
			switch {
			case r == utf8.RuneError && size <= 1:
				fmt.Fprintf(&sb, `\x%02x`, s[0])
			case r == '\n' || r == '\t' || unicode.IsPrint(r):
				sb.Write(s[:size])
			default:
				for _, b := range s[:size] {
					fmt.Fprintf(&sb, `\x%02x`, b)
				}
			}
			s = s[size:]
		}
		raw = raw[:0]
	}
	for _, t := range tokens {
		if t < 0 || t > 255 {
			flush()
			fmt.Fprintf(&sb, "<%d>", t)
			continue
		}
		raw = append(raw, byte(t))
	}
	flush()
	return sb.String()
}

// QuoteBytes returns byte-level tokens as one Go string literal
// (strconv.Quote of the bytes), for logs: tokens outside [0, 256) are
// written as U+FFFD.
func QuoteBytes(tokens []int32) string {
	raw := make([]byte, 0, len(tokens))
	for _, t := range tokens {
		if t < 0 || t > 255 {
			raw = utf8.AppendRune(raw, utf8.RuneError)
			continue
		}
		raw = append(raw, byte(t))
	}
	return strconv.Quote(string(raw))
}

// BitsPerByte converts a byte-level model's mean cross-entropy loss, in
// nats per token, to bits per byte: loss / ln 2. (For tokens of several
// bytes, multiply by tokens/bytes of the text first.)
func BitsPerByte(lossNats float64) float64 { return lossNats / math.Ln2 }
