package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/symddp/symddp/datasets"
)

// Shape classes of the synthetic image dataset, one picture each.
var shapeNames = [...]string{
	"horizontal bar", "vertical bar", "diagonal", "anti-diagonal", "square outline",
	"filled square", "plus", "cross", "ring", "disc",
}

// shapeSide is the side of a synthetic image.
const shapeSide = 28

// Shapes returns n synthetic 28×28 one-channel images (shape (1,28,28)) in
// 10 classes, for running the example where Fashion-MNIST is not installed:
// each is one of shapeNames, of a random size (9 to 17 pixels) and position,
// with random brightness, on a background of uniform noise. Where a shape
// is and how big cannot be told from single pixels, so a model has to find
// local patterns: what convolutions and pooling are for. Sample i is a
// function of (seed, i) alone, and labels cycle through the classes.
func Shapes(n int, seed uint64) (*datasets.InMemory, error) {
	if n <= 0 {
		return nil, fmt.Errorf("shapes dataset of %d images: need at least one", n)
	}
	const px = shapeSide * shapeSide
	x := make([]float32, n*px) // (n,1,28,28)
	y := make([]int32, n)
	for i := range n {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		y[i] = int32(i % len(shapeNames))
		drawShape(x[i*px:(i+1)*px], int(y[i]), r)
	}
	return datasets.NewInMemory(x, y, []int{1, shapeSide, shapeSide}, len(shapeNames))
}

// drawShape renders one image of class class into img (28×28).
func drawShape(img []float32, class int, r *rand.Rand) {
	for i := range img {
		img[i] = float32(0.4 * r.Float64()) // background noise in [0, 0.4)
	}
	size := 9 + r.IntN(9) // the shape's bounding box, size×size
	top, left := r.IntN(shapeSide-size+1), r.IntN(shapeSide-size+1)
	ink := float32(0.6 + 0.4*r.Float64())
	c := float64(size-1) / 2 // centre, in box coordinates
	for i := 0; i < size; i++ {
		for j := 0; j < size; j++ {
			di, dj := float64(i)-c, float64(j)-c
			rad := math.Hypot(di, dj)
			var on bool
			switch class {
			case 0: // horizontal bar
				on = math.Abs(di) < 1.5
			case 1: // vertical bar
				on = math.Abs(dj) < 1.5
			case 2: // diagonal
				on = math.Abs(di-dj) < 1.5
			case 3: // anti-diagonal
				on = math.Abs(di+dj) < 1.5
			case 4: // square outline
				on = i < 2 || j < 2 || i >= size-2 || j >= size-2
			case 5: // filled square
				on = true
			case 6: // plus
				on = math.Abs(di) < 1.5 || math.Abs(dj) < 1.5
			case 7: // cross
				on = math.Abs(di-dj) < 1.5 || math.Abs(di+dj) < 1.5
			case 8: // ring
				on = rad > c-2 && rad <= c+0.5
			case 9: // disc
				on = rad <= c+0.5
			}
			if on {
				img[(top+i)*shapeSide+left+j] = ink
			}
		}
	}
}
