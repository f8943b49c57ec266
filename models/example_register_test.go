package models_test

import (
	"fmt"
	"slices"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
)

// A user model: a linear layer, a standalone ReLU and a classifier, with its
// width taken from the hidden sizes. Registering it in init makes it
// available to `train --model wide-relu` and to models.New.
func init() {
	models.Register("wide-relu", func(cfg models.Config) (models.Model, error) {
		width := 512
		if len(cfg.Hidden) > 0 {
			width = cfg.Hidden[0]
		}
		in := 1
		for _, d := range cfg.Input {
			in *= d
		}
		hidden := models.NewLinear("hidden", in, width, compute.Identity)
		hidden.WeightInit = models.HeNormal // a ReLU follows
		return models.NewClassifier(models.NewSequential("wide-relu", cfg.Input, cfg.Classes,
			hidden, models.NewReLU(), models.NewLinear("out", width, cfg.Classes, compute.Identity))), nil
	})
}

func Example_register() {
	m, err := models.New("wide-relu", models.Config{Input: []int{28, 28}, Hidden: []int{300}})
	if err != nil {
		panic(err)
	}
	for _, p := range m.Params() {
		fmt.Println(p.Name, p.Shape)
	}
	fmt.Println("registered:", slices.Contains(models.Names(), "wide-relu"))
	// Output:
	// hidden.weight [300 784]
	// hidden.bias [300]
	// out.weight [10 300]
	// out.bias [10]
	// registered: true
}
