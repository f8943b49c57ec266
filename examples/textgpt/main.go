// Command textgpt is the README's library example: a byte-level GPT trained
// data-parallel on 2 PEs on the start of Go's own source tree, through the
// packages rather than the train command.
//
//	go run ./examples/textgpt
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

func main() {
	// Starts 2 PEs (re-running this program), or joins mpirun's job, and
	// runs train in each.
	err := ddp.Launch(context.Background(), ddp.Job{PEs: 2}, train)
	if err != nil {
		fmt.Fprintln(os.Stderr, "textgpt:", err)
	}
	os.Exit(launch.ExitCode(err))
}

func train(ctx context.Context, c comm.Comm) error {
	e, err := cpu.New(cpu.Options{Threads: 1}) // OpenBLAS, or pure Go
	if err != nil {
		return err
	}
	m, err := models.New("gpt-tiny", models.Config{}) // 4 layers, 4 heads, width 128, context 128
	if err != nil {
		return err
	}
	// Bytes of Go's source tree (its first 8 MiB), windows of 128+1 tokens.
	trainSet, valSet, err := datasets.LoadText("", 128, datasets.TextOptions{MaxBytes: 8 << 20})
	if err != nil {
		return err
	}
	o, err := optim.New("adamw", optim.Config{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1})
	if err != nil {
		return err
	}
	t, err := ddp.New(c, e, m, o, ddp.Options{GlobalBatch: 16, MaxSteps: 100, LR: 1e-3, ClipNorm: 1, EvalLimit: 256,
		Hooks: ddp.Hooks{OnLog: func(l ddp.LogInfo) {
			if c.MyPE() == 0 { // every PE gets the hooks; print once
				fmt.Printf("step %d loss %.3f %.0f tokens/s\n", l.Step, l.Loss, l.TokensPerSec)
			}
		}}})
	if err != nil {
		return err
	}
	res, err := t.Fit(ctx, trainSet, valSet)
	if err != nil {
		return err
	}
	if c.MyPE() == 0 {
		fmt.Printf("val loss %.3f (%.2f bits per byte); %s\n", res.Test.Loss, datasets.BitsPerByte(res.Test.Loss), res.Replicas)
	}
	return t.Close()
}
