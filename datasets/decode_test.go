package datasets

import (
	"math"
	"testing"
)

func tokensOf(s string) []int32 {
	out := make([]int32, len(s))
	for i := range len(s) {
		out[i] = int32(s[i])
	}
	return out
}

func TestDecodeBytes(t *testing.T) {
	cases := []struct {
		name   string
		tokens []int32
		want   string
	}{
		{"text", tokensOf("func main() {\n\tprintln(\"héllo\")\n}"), "func main() {\n\tprintln(\"héllo\")\n}"},
		{"controls", tokensOf("a\x00b\rc\x1b"), `a\x00b\x0dc\x1b`},
		{"invalid UTF-8", tokensOf("\xffok\xc3"), `\xffok\xc3`},
		{"C1 control in UTF-8", tokensOf("x\u0085y"), `x\xc2\x85y`},
		{"outside the bytes", []int32{'a', 300, 'b', -1}, "a<300>b<-1>"},
		{"split rune around a bad token", []int32{0xc3, 999, 0xa9}, `\xc3<999>\xa9`},
		{"empty", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := DecodeBytes(c.tokens); got != c.want {
				t.Fatalf("DecodeBytes = %q, want %q", got, c.want)
			}
		})
	}
}

func TestQuoteBytes(t *testing.T) {
	if got, want := QuoteBytes(append(tokensOf("a\n\"\xff"), 256)), `"a\n\"\xff�"`; got != want {
		t.Fatalf("QuoteBytes = %s, want %s", got, want)
	}
}

func TestBitsPerByte(t *testing.T) {
	if got := BitsPerByte(math.Log(256)); math.Abs(got-8) > 1e-12 {
		t.Fatalf("BitsPerByte(ln 256) = %v, want 8 (a uniform guess over bytes)", got)
	}
}
