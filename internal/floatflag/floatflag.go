// Package floatflag checks the float flags of a command line in one
// place: a range check written as comparisons lets NaN through (NaN < 0
// is false, and NaN > 0 too, so a NaN can read as "unset"), and no flag of
// the commands means anything at Inf.
package floatflag

import (
	"fmt"
	"math"
	"strconv"

	"github.com/spf13/pflag"
)

// CheckFinite returns an error naming the first float flag (float32 or
// float64) set on fs whose value is NaN or ±Inf, nil when there is none.
// Call it after fs.Parse, before the range checks.
func CheckFinite(fs *pflag.FlagSet) error {
	var err error
	fs.Visit(func(f *pflag.Flag) {
		if t := f.Value.Type(); err != nil || (t != "float32" && t != "float64") {
			return
		}
		if v, perr := strconv.ParseFloat(f.Value.String(), 64); perr == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			err = fmt.Errorf("--%s %s: want a finite number", f.Name, f.Value.String())
		}
	})
	return err
}
