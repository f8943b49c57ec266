package traincmd

import (
	"strings"

	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
)

// sizeFlags are the flags that size a language model, each named as the
// model's Describe map (ddp.ModelDescriber) names the size, with _ for -.
var sizeFlags = []string{"layers", "heads", "kv-heads", "width", "ffn-hidden", "context", "vocab", "rope-theta"}

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
	m, err := models.New(o.model, models.Config{})
	if err != nil {
		return ""
	}
	d, ok := m.(ddp.ModelDescriber)
	if !ok {
		return ""
	}
	sizes := d.Describe()
	var flags []string
	for _, f := range sizeFlags {
		if _, ok := sizes[strings.ReplaceAll(f, "-", "_")]; ok {
			flags = append(flags, f)
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
