package computetest

import (
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
)

// refSoftmax returns the float64 reference of SoftmaxCrossEntropy's gradient
// and stats.
func refSoftmax(x []float32, labels []int32, classes int, scale float64) (grad []float64, loss float64, correct, labelled int) {
	grad = make([]float64, len(x))
	for i, y := range labels {
		if y == -1 {
			continue
		}
		row := x[i*classes : (i+1)*classes]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		m := float64(row[best])
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v) - m)
		}
		loss += m + math.Log(sum) - float64(row[y])
		for j, v := range row {
			p := math.Exp(float64(v)-m) / sum
			if j == int(y) {
				p--
			}
			grad[i*classes+j] = p * scale
		}
		if best == int(y) {
			correct++
		}
		labelled++
	}
	return
}

func testSoftmax(t *testing.T, e compute.Engine) {
	const rows, classes = 6, 5
	r := rng(11)
	xv := randVals(r, rows*classes)
	for i := range xv {
		xv[i] *= 4
	}
	lv := []int32{3, 0, -1, 4, 1, -1}
	const scale = 0.25
	logits, dlogits := tensorOf(e, xv, rows, classes), tensorOf(e, randVals(r, rows*classes), rows, classes)
	labels := e.AllocLabels(rows)
	e.SetLabels(labels, lv)
	stats := tensorOf(e, []float32{1, 2, 3}, 3)
	e.SoftmaxCrossEntropy(logits, labels, dlogits, scale, stats)

	wantG, loss, correct, labelled := refSoftmax(xv, lv, classes, scale)
	for i, g := range read(e, dlogits) {
		if !near(g, wantG[i], 1e-6) {
			t.Errorf("dlogits[%d] = %v, want %v", i, g, wantG[i])
		}
		if lv[i/classes] == -1 && g != 0 {
			t.Errorf("dlogits[%d] = %v in a padding row, want 0", i, g)
		}
	}
	st := read(e, stats)
	if !near(st[0], 1+loss, 1e-6) || st[1] != float32(2+correct) || st[2] != float32(3+labelled) {
		t.Errorf("stats = %v, want [%v %v %v] (added to [1 2 3])", st, 1+loss, 2+correct, 3+labelled)
	}
	if labelled != 4 {
		t.Fatalf("reference counted %d labelled rows, want 4", labelled)
	}
}

// Huge and equal logits give finite, exact results.
func testSoftmaxStable(t *testing.T, e compute.Engine) {
	const classes = 4
	xv := []float32{
		1e30, -1e30, 0, 5, // label 0: certain and right
		1e30, -1e30, 0, 5, // label 1: certain and wrong
		1e30, 1e30, 1e30, 1e30, // equal, huge
		-1e30, -1e30, -1e30, -1e30, // equal, hugely negative
		0, 0, 0, 0, // equal
	}
	lv := []int32{0, 1, 2, 3, 0}
	logits, dlogits := tensorOf(e, xv, 5, classes), e.Alloc(5, classes)
	labels := e.AllocLabels(5)
	e.SetLabels(labels, lv)
	stats := e.Alloc(3)
	e.SoftmaxCrossEntropy(logits, labels, dlogits, 1, stats)
	want := []float32{
		0, 0, 0, 0,
		1, -1, 0, 0,
		0.25, 0.25, -0.75, 0.25,
		0.25, 0.25, 0.25, -0.75,
		-0.75, 0.25, 0.25, 0.25,
	}
	got := read(e, dlogits)
	for i := range got {
		if !near(got[i], float64(want[i]), 1e-6) {
			t.Errorf("dlogits[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	// Row losses: 0, 2e30, then log 4 three times. Ties take the first index:
	// rows 0 and 4 are correct.
	st := read(e, stats)
	if wantLoss := 2e30 + 3*math.Log(4); !near(st[0], wantLoss, 1e-6) || st[1] != 2 || st[2] != 5 {
		t.Errorf("stats = %v, want [%v 2 5]", st, wantLoss)
	}
}

func testSoftmaxBadLabel(t *testing.T, e compute.Engine) {
	logits, dlogits, stats := e.Alloc(2, 3), e.Alloc(2, 3), e.Alloc(3)
	labels := e.AllocLabels(2)
	for _, bad := range []int32{3, -2} {
		e.SetLabels(labels, []int32{0, bad})
		expectPanic(t, "SoftmaxCrossEntropy with a label out of range",
			func() { e.SoftmaxCrossEntropy(logits, labels, dlogits, 1, stats) }, "label")
	}
	expectPanic(t, "SoftmaxCrossEntropy with too few labels",
		func() { e.SoftmaxCrossEntropy(e.Alloc(3, 3), labels, e.Alloc(3, 3), 1, stats) }, "label")
}
