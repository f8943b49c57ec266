package main

import (
	"reflect"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

func TestTrimZeros(t *testing.T) {
	labels := func(ls ...string) []plot.Tick {
		ticks := make([]plot.Tick, len(ls))
		for i, l := range ls {
			ticks[i] = plot.Tick{Value: float64(i), Label: l}
		}
		return ticks
	}
	for _, c := range []struct{ in, want []string }{
		{[]string{"0.00", "", "25000.00", "50000.00"}, []string{"0", "", "25000", "50000"}},
		{[]string{"2.50", "5.00"}, []string{"2.5", "5.0"}}, // as many decimals on every label
		{[]string{"0.0025", "0.0050"}, []string{"0.0025", "0.0050"}},
		{[]string{"0", "10", "20"}, []string{"0", "10", "20"}},
		{[]string{"1.0e-05", "2.0e-05"}, []string{"1.0e-05", "2.0e-05"}},
		{[]string{"", ""}, []string{"", ""}},
	} {
		var got []string
		for _, t := range trimZeros(labels(c.in...)) {
			got = append(got, t.Label)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
	// gonum's own labels for a throughput axis from 0
	for _, tk := range (trimmedTicks{}).Ticks(0, 55000) {
		if strings.Contains(tk.Label, ".") {
			t.Errorf("tick %v: label %q keeps its zeros", tk.Value, tk.Label)
		}
	}
}
