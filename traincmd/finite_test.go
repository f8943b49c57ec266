package traincmd

import (
	"strings"
	"testing"
)

// TestNonFiniteFloatsRefused: NaN and Inf in a float flag are one line
// naming the flag and exit 2 before any PE starts; NaN used to pass the
// range checks (--rope-theta nan trained with the preset's 10000).
func TestNonFiniteFloatsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "llama-tiny", "--rope-theta", "nan"}, "train: --rope-theta NaN: want a finite number"},
		{[]string{"--model", "llama-tiny", "--rope-theta", "inf"}, "train: --rope-theta +Inf: want a finite number"},
		{[]string{"--momentum", "nan"}, "train: --momentum NaN: want a finite number"},
		{[]string{"--lr", "inf"}, "train: --lr +Inf: want a finite number"},
		{[]string{"--clip-norm", "inf"}, "train: --clip-norm +Inf: want a finite number"},
		{[]string{"--optimizer", "adam", "--eps", "nan"}, "train: --eps NaN: want a finite number"},
		{[]string{"--model", "gpt-tiny", "--peak-tflops", "-inf"}, "train: --peak-tflops -Inf: want a finite number"},
	} {
		if line, ok := usageRefusal(append(tc.args, "--dataset", "synthetic")...); !ok || line != tc.want {
			t.Errorf("train %s: %q; want exit 2 and %q (and the --help pointer)", strings.Join(tc.args, " "), line, tc.want)
		}
	}
}
