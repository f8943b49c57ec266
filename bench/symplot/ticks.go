package main

import (
	"strings"

	"gonum.org/v1/plot"
)

// trimmedTicks are gonum's default ticks with the trailing zeros that all
// their labels share dropped: gonum labels 0 to 50000 in steps of 25000
// "0.00", "25000.00", "50000.00".
type trimmedTicks struct{ plot.DefaultTicks }

// Ticks returns the ticks in [min, max].
func (t trimmedTicks) Ticks(min, max float64) []plot.Tick {
	return trimZeros(t.DefaultTicks.Ticks(min, max))
}

// trimZeros drops from the labels of ticks the trailing zeros after the
// decimal point that every label has, and a point left with no decimals
// after it; when a label has no point, or an exponent, all are left alone.
func trimZeros(ticks []plot.Tick) []plot.Tick {
	common := -1 // trailing zeros that every label has
	for _, t := range ticks {
		if t.Label == "" {
			continue
		}
		point := strings.IndexByte(t.Label, '.')
		if point < 0 || strings.ContainsAny(t.Label, "eE") {
			return ticks
		}
		zeros := len(t.Label) - len(strings.TrimRight(t.Label[point+1:], "0")) - point - 1
		if common < 0 || zeros < common {
			common = zeros
		}
	}
	if common <= 0 {
		return ticks
	}
	for i, t := range ticks {
		if t.Label != "" {
			ticks[i].Label = strings.TrimSuffix(t.Label[:len(t.Label)-common], ".")
		}
	}
	return ticks
}
