package datasets_test

import (
	"fmt"

	"github.com/symddp/symddp/datasets"
)

// GPT-2's tokenizer is built in: its ranks are compiled into the program.
func ExampleNewTokenizer() {
	tok, err := datasets.NewTokenizer("gpt2")
	if err != nil {
		fmt.Println(err)
		return
	}
	ids := tok.Encode("Hello world")
	eot, _ := tok.EOT()
	text, err := tok.Decode(append(ids, eot))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ids, tok.Vocab(), eot)
	fmt.Printf("%q\n", text)
	// Output:
	// [15496 995] 50257 50256
	// "Hello world<|endoftext|>"
}
