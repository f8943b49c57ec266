package models

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/symddp/symddp/compute"
)

// Sequential is a Network made of layers applied one after another. Its
// parameters are its layers' parameters, in layer order, each tied
// parameter (ParamSpec.TiedTo) once, where its owner declares it.
type Sequential struct {
	name    string
	in      []int
	classes int
	layers  []Layer

	first, count []int // each layer's first owned parameter index and owned-parameter count
}

var _ Network = (*Sequential)(nil)

// NewSequential returns a network that maps samples of shape in through the
// layers to classes logits. Build checks that the shapes chain. Wrap it in
// NewClassifier to train it.
func NewSequential(name string, in []int, classes int, layers ...Layer) *Sequential {
	return &Sequential{name: name, in: append([]int(nil), in...), classes: classes, layers: layers}
}

// Name is the model's name.
func (s *Sequential) Name() string { return s.name }

// InputShape is the shape of one sample.
func (s *Sequential) InputShape() []int { return append([]int(nil), s.in...) }

// Classes is the number of logits.
func (s *Sequential) Classes() int { return s.classes }

// Layers are the model's layers, first to last.
func (s *Sequential) Layers() []Layer { return s.layers }

// Params declares every layer's parameters, layer by layer, leaving out
// tied uses (their owner declares them).
func (s *Sequential) Params() []ParamSpec {
	var declared [][]ParamSpec
	for _, l := range s.layers {
		declared = append(declared, l.Params())
	}
	return owned(declared)
}

// owned lists the declared parameters that take arena space: all but the
// tied uses, in order.
func owned(declared [][]ParamSpec) []ParamSpec {
	var out []ParamSpec
	for _, specs := range declared {
		for _, p := range specs {
			if p.TiedTo == "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// layerBuild completes base, a layer's Build, with the views of the
// parameters it declares (specs, resolved by uses) and which of them it
// adds its gradient to; owned counts the ones it owns.
func layerBuild(base Build, specs []ParamSpec, uses []paramUse, params, grads []compute.Tensor) (b Build, owned int) {
	b = base
	for k, p := range specs {
		u := uses[k]
		b.Params = append(b.Params, params[u.index])
		b.Grads = append(b.Grads, grads[u.index])
		b.AddGrads = append(b.AddGrads, u.add)
		if p.TiedTo == "" {
			owned++
		}
	}
	return b, owned
}

// Build binds each layer to its slice of the parameter and gradient views
// and allocates the layers' activations for batch rows.
func (s *Sequential) Build(e compute.Engine, params, grads []compute.Tensor, batch int) error {
	if err := s.build(e, params, grads, batch); err != nil {
		return fmt.Errorf("build model %s: %w", s.name, err)
	}
	return nil
}

func (s *Sequential) build(e compute.Engine, params, grads []compute.Tensor, batch int) error {
	if len(s.layers) == 0 {
		return errors.New("no layers")
	}
	if batch <= 0 {
		return fmt.Errorf("batch %d", batch)
	}
	specs := s.Params()
	if len(params) != len(specs) || len(grads) != len(specs) {
		return fmt.Errorf("got %d parameter and %d gradient views, want %d of each", len(params), len(grads), len(specs))
	}
	var declared [][]ParamSpec
	for _, l := range s.layers {
		declared = append(declared, l.Params())
	}
	uses, err := resolveTies(declared)
	if err != nil {
		return err
	}
	s.first, s.count = make([]int, len(s.layers)), make([]int, len(s.layers))
	shape, next := s.in, 0
	for i, l := range s.layers {
		b, owned := layerBuild(Build{Engine: e, Batch: batch, In: shape, NeedInputGrad: i > 0}, declared[i], uses[i], params, grads)
		s.first[i], s.count[i] = next, owned
		out, err := l.Build(b)
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		shape, next = out, next+owned
	}
	if size(shape) != s.classes {
		return fmt.Errorf("last layer gives outputs of shape %v, want %d classes", shape, s.classes)
	}
	s.chainFused(e)
	return nil
}

// chainFused lets each fused Linear layer that directly follows another
// take over that layer's ReLU derivative and bias gradient in its
// input-gradient GEMM (compute.FusedLinear.ChainInput), then notices how
// every Linear layer runs on engines that fuse them (the CUDA engine's log).
func (s *Sequential) chainFused(e compute.Engine) {
	if _, ok := e.(compute.LinearFuser); !ok {
		return
	}
	for i := 1; i < len(s.layers); i++ {
		prev, ok1 := s.layers[i-1].(*Linear)
		next, ok2 := s.layers[i].(*Linear)
		if ok1 && ok2 && prev.fused != nil && next.fused != nil && prev.act == compute.ReLU {
			_ = next.fused.ChainInput(prev.fused) // on failure both keep their own backward
		}
	}
	if n, ok := e.(interface{ Notice(string) }); ok {
		n.Notice("model " + s.name + ": " + s.Fusion())
	}
}

// Fusion says how the model's Linear layers run on the engine it was built
// on ("fc1 fused: ...; fc2 ..."); see Linear.Fusion. Other layers are not
// named.
func (s *Sequential) Fusion() string {
	var parts []string
	for _, l := range s.layers {
		if li, ok := l.(*Linear); ok {
			parts = append(parts, li.name+" "+li.Fusion())
		}
	}
	return strings.Join(parts, "; ")
}

// Forward runs the layers on x (B, In...) and returns the logits (B,Classes).
func (s *Sequential) Forward(x compute.Tensor) compute.Tensor {
	for _, l := range s.layers {
		x = l.Forward(x)
	}
	return x
}

// Backward runs the layers' Backward from the last to the first, starting
// from dlogits (B,Classes), and calls ready with a layer's first owned
// parameter index as soon as that layer is done.
func (s *Sequential) Backward(dlogits compute.Tensor, ready func(firstParam int)) {
	dy := dlogits
	for i := len(s.layers) - 1; i >= 0; i-- {
		dy = s.layers[i].Backward(dy)
		if ready != nil && s.count[i] > 0 {
			ready(s.first[i])
		}
	}
}

// paramUse is where one declared parameter lives among a model's unique
// parameters, and whether its layer adds its gradient to another use's.
type paramUse struct {
	index int
	add   bool
}

// resolveTies maps every parameter the layers declare (declared[i] is layer
// i's, in forward order, a Residual's inner layers flattened) to its index
// among the parameters that take arena space (those without TiedTo, in
// order). A use adds to the gradient when a later layer also uses the same
// parameter: backward runs the later one first, and that one overwrites.
func resolveTies(declared [][]ParamSpec) ([][]paramUse, error) {
	index := map[string]int{}
	shapes := map[string][]int{}
	named := map[string]bool{}
	var owners []string
	uses := make([][]paramUse, len(declared))
	for i, specs := range declared {
		for _, p := range specs {
			if named[p.Name] {
				return nil, fmt.Errorf("two parameters are named %q", p.Name)
			}
			named[p.Name] = true
			if p.TiedTo == "" {
				index[p.Name] = len(owners)
				shapes[p.Name] = p.Shape
				owners = append(owners, p.Name)
				uses[i] = append(uses[i], paramUse{index: index[p.Name]})
				continue
			}
			j, ok := index[p.TiedTo]
			if !ok {
				return nil, fmt.Errorf("%s is tied to %q, which no earlier layer declares", p.Name, p.TiedTo)
			}
			if !slices.Equal(shapes[p.TiedTo], p.Shape) {
				return nil, fmt.Errorf("%s %v is tied to %s of shape %v", p.Name, p.Shape, p.TiedTo, shapes[p.TiedTo])
			}
			uses[i] = append(uses[i], paramUse{index: j})
		}
	}
	last := map[int][2]int{} // parameter index -> (layer, position) of its last use
	for i := range uses {
		for k, u := range uses[i] {
			last[u.index] = [2]int{i, k}
		}
	}
	for i := range uses {
		for k := range uses[i] {
			uses[i][k].add = last[uses[i][k].index] != [2]int{i, k}
		}
	}
	return uses, nil
}
