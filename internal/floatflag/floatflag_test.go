package floatflag

import (
	"io"
	"testing"

	"github.com/spf13/pflag"
)

// TestCheckFinite: NaN and Inf are refused for float32 and float64 flags,
// naming the flag and the value; finite values, flags of other types and
// flags left out pass.
func TestCheckFinite(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--f64", "0", "--f32", "-1.5e30", "--name", "nan"}, ""},
		{[]string{"--f64", "nan"}, "--f64 NaN: want a finite number"},
		{[]string{"--f64", "NaN"}, "--f64 NaN: want a finite number"},
		{[]string{"--f64", "-inf"}, "--f64 -Inf: want a finite number"},
		{[]string{"--f32", "nan"}, "--f32 NaN: want a finite number"},
		{[]string{"--f32", "Inf"}, "--f32 +Inf: want a finite number"},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Float64("f64", 1, "")
		fs.Float32("f32", 1, "")
		fs.String("name", "", "")
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		got := ""
		if err := CheckFinite(fs); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%v: error %q, want %q", c.args, got, c.want)
		}
	}
}
