package traincmd

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp"
)

// fault is a failure injected on purpose (--fault-inject, hidden), so that
// tests can show what the job does when a PE dies, hangs or diverges.
type fault struct {
	pe   int
	step int
	mode string // exit, panic, kill, hang, nan
}

func parseFault(s string) (*fault, error) {
	if s == "" {
		return nil, nil
	}
	f := &fault{pe: -1, step: 1, mode: "exit"}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--fault-inject %q: want key=value pairs", s)
		}
		var err error
		switch k {
		case "pe":
			f.pe, err = strconv.Atoi(v)
		case "step":
			f.step, err = strconv.Atoi(v)
		case "mode":
			f.mode = v
		default:
			err = fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return nil, fmt.Errorf("--fault-inject %q: %v", s, err)
		}
	}
	switch f.mode {
	case "exit", "panic", "kill", "hang", "nan":
	default:
		return nil, fmt.Errorf("--fault-inject mode %q: want exit, panic, kill, hang or nan", f.mode)
	}
	return f, nil
}

// wrap returns hooks that fire the fault on PE f.pe after step f.step-1
// (so that it hits step f.step), then call the original hooks.
func (f *fault) wrap(h ddp.Hooks, pe int, train datasets.Source) ddp.Hooks {
	if f.pe != pe && f.pe != -1 {
		return h
	}
	next := h.OnStep
	h.OnStep = func(s ddp.StepInfo) {
		if next != nil {
			next(s)
		}
		if s.Step != f.step-1 {
			return
		}
		switch f.mode {
		case "exit":
			fmt.Fprintf(os.Stderr, "fault injected: PE %d exits with status 1 before step %d\n", pe, f.step)
			os.Exit(1)
		case "panic":
			panic(fmt.Sprintf("fault injected: PE %d panics before step %d", pe, f.step))
		case "kill":
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		case "hang":
			fmt.Fprintf(os.Stderr, "fault injected: PE %d stalls before step %d\n", pe, f.step)
			for {
				time.Sleep(time.Hour)
			}
		case "nan":
			poison(train)
		}
	}
	return h
}

// poison makes every value of the training set NaN.
func poison(train datasets.Source) {
	nan := float32(math.NaN())
	switch d := train.(type) {
	case *datasets.InMemory:
		for i := range d.X {
			d.X[i] = nan
		}
	case *datasets.ByteSamples:
		var values [256]float32
		for b := range values {
			values[b] = nan
		}
		d.SetValues(values)
	}
}
