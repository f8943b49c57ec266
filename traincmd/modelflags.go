package traincmd

import (
	"fmt"
	"strings"

	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
)

// sizeFlag is a flag that sizes a language model: its name, which is the
// model's Describe map's (ddp.ModelDescriber) with _ for -, the
// models.Config field it sets, and its value (nil for --rope-theta, not a
// whole number: sizedWith lists it, checkSizesRead does not check it).
type sizeFlag struct {
	name, field string
	value       func(o *options) int
}

// key is the flag's name in a Describe map.
func (f sizeFlag) key() string { return strings.ReplaceAll(f.name, "-", "_") }

// sizeFlags are the flags that size a language model, in --help's order.
var sizeFlags = []sizeFlag{
	{"layers", "Layers", func(o *options) int { return o.layers }},
	{"heads", "Heads", func(o *options) int { return o.heads }},
	{"kv-heads", "KVHeads", func(o *options) int { return o.kvHeads }},
	{"width", "Width", func(o *options) int { return o.width }},
	{"ffn-hidden", "FFNHidden", func(o *options) int { return o.ffnHidden }},
	{"context", "Context", func(o *options) int { return o.context }},
	{"vocab", "Vocab", func(o *options) int { return o.vocab }},
	{"rope-theta", "RopeTheta", nil},
}

// presetSizes is the Describe map (ddp.ModelDescriber) of --model's
// preset, nil for a model that is not built or says nothing of its sizes.
func (o *options) presetSizes() map[string]int {
	m, err := models.New(o.model, models.Config{})
	if err != nil {
		return nil
	}
	d, ok := m.(ddp.ModelDescriber)
	if !ok {
		return nil
	}
	return d.Describe()
}

// sizedWith lists the flags that size the preset of --model: those of
// sizeFlags its Describe map has, --hidden for the mlp, "" for a model that
// is not built or says nothing of its sizes.
func (o *options) sizedWith() string {
	if !o.languageModel {
		if o.model == "mlp" {
			return "--hidden"
		}
		return ""
	}
	sizes := o.presetSizes()
	var flags []string
	for _, f := range sizeFlags {
		if _, ok := sizes[f.key()]; ok {
			flags = append(flags, f.name)
		}
	}
	return flagList(flags)
}

// checkModelOpts refuses --model-opt for a built-in model, which reads no
// models.Config.Options.
func (o *options) checkModelOpts() error {
	if !o.set("model-opt") || !models.BuiltIn(o.model) {
		return nil
	}
	sized := ""
	if s := o.sizedWith(); s != "" {
		sized = ", sized with " + s
	}
	return usagef("--model-opt applies to models a program registers (models.Register, docs/LIBRARY.md), not to the built-in %s%s", o.model, sized)
}

// checkHeads refuses, for a language model, query heads that do not divide
// its width and, where it has grouped key/value heads (kv_heads in its
// Describe map), query heads that are not a multiple of the key/value heads:
// each names both flags and says which number is the preset's (the model's
// own errors name no flag).
func (o *options) checkHeads() error {
	if !o.languageModel || (!o.set("heads") && !o.set("kv-heads") && !o.set("width")) {
		return nil
	}
	sizes := o.presetSizes()
	heads, kv, width := sizes["heads"], sizes["kv_heads"], sizes["width"]
	if o.heads > 0 {
		heads = o.heads
	}
	if o.kvHeads > 0 {
		kv = o.kvHeads
	}
	if o.width > 0 {
		width = o.width
	}
	value := func(flag string, n int) string {
		if o.set(flag) {
			return fmt.Sprintf("--%s %d", flag, n)
		}
		return fmt.Sprintf("--%s %d (%s's)", flag, n, o.model)
	}
	if heads > 0 && width > 0 && width%heads != 0 {
		return usagef("%s does not divide %s: give --width a multiple of %d, or --heads a divisor of %d",
			value("heads", heads), value("width", width), heads, width)
	}
	if heads < 1 || kv < 1 || heads%kv == 0 {
		return nil // no grouped heads, or sizes the model reports
	}
	return usagef("%s is not a multiple of %s: give --heads a multiple of %d, or --kv-heads a divisor of %d",
		value("heads", heads), value("kv-heads", kv), kv, heads)
}

// flagList writes flags as "--a, --b and --c".
func flagList(flags []string) string {
	list := make([]string, len(flags))
	for i, f := range flags {
		list[i] = "--" + f
	}
	if len(list) < 2 {
		return strings.Join(list, "")
	}
	return strings.Join(list[:len(list)-1], ", ") + " and " + list[len(list)-1]
}

// checkSizesRead refuses a size flag that the model was not built with: a
// model a program registers whose factory keeps a size of its own where
// models.Config gives one would otherwise train another shape than the
// flags say, without a word. The sizes built are read back from the
// model's Describe map (ddp.ModelDescriber) or, for a model on the Decoder
// skeleton, its spec; a flag the model reports nothing of is not checked.
func (o *options) checkSizesRead() error {
	if !o.languageModel {
		return nil
	}
	given := false
	for _, f := range sizeFlags {
		given = given || (f.value != nil && o.set(f.name))
	}
	if !given {
		return nil
	}
	m, err := models.New(o.model, o.modelConfig())
	if err != nil {
		return nil // reported where the model is built
	}
	built := builtSizes(m)
	for _, f := range sizeFlags {
		if f.value == nil || !o.set(f.name) || f.value(o) == 0 {
			continue
		}
		want := f.value(o)
		have, ok := built[f.key()]
		if ok && have != want {
			return usagef("--%s %d: model %s was built with %s %d: its factory keeps its own and does not read models.Config's %s (docs/LIBRARY.md)",
				f.name, want, o.model, strings.ReplaceAll(f.name, "-", " "), have, f.field)
		}
	}
	return nil
}

// builtSizes is the model's sizes as its Describe map names them, or, for
// a model on the Decoder skeleton that does not describe itself, its
// spec's layers, width, context and vocabulary; nil when neither says.
func builtSizes(m models.Model) map[string]int {
	if d, ok := m.(ddp.ModelDescriber); ok {
		return d.Describe()
	}
	if d, ok := m.(interface{ Spec() models.DecoderSpec }); ok {
		s := d.Spec()
		return map[string]int{"layers": s.Layers, "width": s.Width, "context": s.Context, "vocab": s.Vocab}
	}
	return nil
}
