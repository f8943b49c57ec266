package optim

import (
	"fmt"
	"testing"
)

// wantLRs fails t unless s gives want[step] at each listed step.
func wantLRs(t *testing.T, s Schedule, want map[int]float64) {
	t.Helper()
	for step, lr := range want {
		near(t, fmt.Sprintf("LR(%d)", step), float64(s.LR(step)), lr, 1e-7)
	}
}

func TestConstant(t *testing.T) {
	s, err := NewConstant(0.25)
	if err != nil {
		t.Fatal(err)
	}
	wantLRs(t, s, map[int]float64{1: 0.25, 2: 0.25, 1000000: 0.25})
}

func TestStepDecay(t *testing.T) {
	s, err := NewStepDecay(0.1, 3, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	// Steps 1–3 at 0.1, 4–6 at 0.05, 7–9 at 0.025, 31 at 0.1·0.5^10.
	wantLRs(t, s, map[int]float64{1: 0.1, 3: 0.1, 4: 0.05, 6: 0.05, 7: 0.025, 31: 0.1 / 1024})
}

func TestCosine(t *testing.T) {
	s, err := NewCosine(1, 0.2, 4)
	if err != nil {
		t.Fatal(err)
	}
	// 0.2 + 0.8·(1 + cos(π·t/4))/2 for t = 0 … 4: 1, 0.2 + 0.8·0.8535534,
	// 0.6, 0.2 + 0.8·0.1464466, 0.2; after that 0.2.
	wantLRs(t, s, map[int]float64{1: 1, 2: 0.882842712, 3: 0.6, 4: 0.317157288, 5: 0.2, 6: 0.2, 100: 0.2})
	if got := s.LR(1); got != 1 {
		t.Errorf("LR(1) = %g, want exactly 1", got)
	}
	if got := s.LR(5); got != 0.2 {
		t.Errorf("LR(5) = %g, want exactly 0.2", got)
	}
}

func TestWarmup(t *testing.T) {
	c, _ := NewCosine(1, 0, 4)
	s, err := NewWarmup(4, c)
	if err != nil {
		t.Fatal(err)
	}
	// 1/4, 2/4, 3/4, 1, then the cosine from its step 1.
	wantLRs(t, s, map[int]float64{1: 0.25, 2: 0.5, 3: 0.75, 4: 1, 5: 1, 6: 0.853553391, 7: 0.5, 9: 0})
	same, err := NewWarmup(0, c)
	if err != nil || same != c {
		t.Errorf("NewWarmup(0, s) = %v, %v, want s itself", same, err)
	}
}

func TestNewSchedule(t *testing.T) {
	cases := []struct {
		name string
		c    ScheduleConfig
		want map[int]float64
	}{
		{"constant", ScheduleConfig{LR: 0.5, Total: 7, Gamma: 3}, map[int]float64{1: 0.5, 10: 0.5}},
		{"constant", ScheduleConfig{LR: 0.5, Warmup: 2}, map[int]float64{1: 0.25, 2: 0.5, 3: 0.5}},
		// Decays every 2 steps after a warmup of 1.
		{"step", ScheduleConfig{LR: 0.8, Warmup: 1, StepSize: 2, Gamma: 0.5},
			map[int]float64{1: 0.8, 2: 0.8, 3: 0.8, 4: 0.4, 5: 0.4, 6: 0.2}},
		// Warmup 2 of 6 steps: the cosine runs over 4 and ends at step 7.
		{"cosine", ScheduleConfig{LR: 1, Warmup: 2, Total: 6, MinLR: 0},
			map[int]float64{1: 0.5, 2: 1, 3: 1, 4: 0.853553391, 5: 0.5, 6: 0.146446609, 7: 0, 8: 0}},
	}
	for _, c := range cases {
		s, err := NewSchedule(c.name, c.c)
		if err != nil {
			t.Fatalf("%s %+v: %v", c.name, c.c, err)
		}
		wantLRs(t, s, c.want)
	}
	if got := ScheduleNames(); fmt.Sprint(got) != "[constant cosine step]" {
		t.Errorf("ScheduleNames() = %q", got)
	}
}

func TestScheduleErrors(t *testing.T) {
	cases := []struct {
		name string
		c    ScheduleConfig
		want []string
	}{
		{"linear", ScheduleConfig{LR: 1}, []string{`unknown schedule "linear"`, "known: constant, cosine, step"}},
		{"constant", ScheduleConfig{LR: -1}, []string{"constant schedule", "lr", ">= 0"}},
		{"constant", ScheduleConfig{LR: 1, Warmup: -1}, []string{"warmup", ">= 0"}},
		{"step", ScheduleConfig{LR: 1, Gamma: 0.5}, []string{"step schedule", "step size must be >= 1"}},
		{"step", ScheduleConfig{LR: 1, StepSize: 10, Gamma: 0}, []string{"gamma", "(0, 1]"}},
		{"step", ScheduleConfig{LR: 1, StepSize: 10, Gamma: 1.5}, []string{"gamma", "(0, 1]"}},
		{"cosine", ScheduleConfig{LR: 1, Total: 100, Warmup: 100}, []string{"total steps 100 must be above warmup steps 100"}},
		{"cosine", ScheduleConfig{LR: 1, Total: 100, MinLR: 2}, []string{"min lr 2 is above lr 1"}},
		{"cosine", ScheduleConfig{LR: 1, Total: 100, MinLR: -0.1}, []string{"min lr", ">= 0"}},
	}
	for _, c := range cases {
		s, err := NewSchedule(c.name, c.c)
		wantErr(t, err, c.want...)
		if s != nil {
			t.Errorf("NewSchedule(%q, %+v) returned a schedule with its error", c.name, c.c)
		}
	}
	_, err := NewCosine(1, 0, 0)
	wantErr(t, err, "total steps must be >= 1")
	_, err = NewWarmup(3, nil)
	wantErr(t, err, "warmup", "no schedule")
}

func TestScheduleStepZeroPanics(t *testing.T) {
	c, _ := NewConstant(1)
	st, _ := NewStepDecay(1, 2, 0.5)
	co, _ := NewCosine(1, 0, 10)
	w, _ := NewWarmup(2, co)
	for _, s := range []Schedule{c, st, co, w} {
		wantPanic(t, "step 0, steps count from 1", func() { s.LR(0) })
	}
}

// TestSettled: the cosine schedule stays at its minimum from Total + 1 on
// (warmup included), and says so; a warmup before a schedule that keeps
// changing, the step decay and the constant say nothing.
func TestSettled(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  ScheduleConfig
		want int
	}{
		{"cosine", ScheduleConfig{LR: 0.1, Total: 10}, 11},
		{"cosine", ScheduleConfig{LR: 0.1, Warmup: 3, Total: 10, MinLR: 0.01}, 11},
		{"step", ScheduleConfig{LR: 0.1, Warmup: 3, StepSize: 2, Gamma: 0.5}, 0},
	} {
		s, err := NewSchedule(c.name, c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		at := 0
		if st, ok := s.(Settling); ok {
			at = st.Settled()
		}
		if at != c.want {
			t.Errorf("%s %+v: settled at %d, want %d", c.name, c.cfg, at, c.want)
		}
		if at > 0 {
			for step := at; step < at+5; step++ {
				if s.LR(step) != c.cfg.MinLR {
					t.Errorf("%s %+v: LR(%d) = %g, want the minimum %g from step %d on", c.name, c.cfg, step, s.LR(step), c.cfg.MinLR, at)
				}
			}
			if s.LR(at-1) == c.cfg.MinLR {
				t.Errorf("%s %+v: LR(%d) = %g already", c.name, c.cfg, at-1, s.LR(at-1))
			}
		}
	}
	c, _ := NewSchedule("constant", ScheduleConfig{LR: 0.1})
	if _, ok := c.(Settling); ok {
		t.Error("the constant schedule says it settles")
	}
}
