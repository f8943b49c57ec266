package ddp

import "fmt"

// InitError is the error of New when PE 0 could not start from the
// weights of Options.InitFrom (a missing file, a tensor missing or of the
// wrong shape or dtype, sizes that differ from the model's): every PE
// returns it alike (Shared), so a command reports one line, as for a bad
// command line.
type InitError struct {
	// Path is Options.InitFrom.
	Path string
	// Reason is what PE 0 found, naming the file and the tensor or field.
	Reason string
}

func (e *InitError) Error() string {
	return fmt.Sprintf("initial weights (read on PE 0): %s", e.Reason)
}

// initFrom reads Options.InitFrom on PE 0 into the parameter arena and
// tells every PE whether it could (collective); the caller broadcasts the
// arena.
func (t *Trainer) initFrom() error {
	msg := ctlMsg{OK: true}
	if t.c.MyPE() == 0 {
		r, err := readInitWeights(t.opts.InitFrom, t.m)
		if err == nil {
			t.e.SetTensor(t.pView, r.arena)
			err = t.e.Sync()
		}
		if err != nil {
			msg = ctlMsg{Err: err.Error()}
		} else if msg.Path = r.source; r.warning != "" {
			msg.Warnings = []string{"initial weights: " + r.warning}
		}
	}
	got, err := t.shareFromRoot(msg)
	if err != nil {
		return fmt.Errorf("initial weights from %s: %w", t.opts.InitFrom, err)
	}
	for _, w := range got.Warnings {
		t.warn(w)
	}
	if !got.OK {
		return sharedFrom(0, &InitError{Path: t.opts.InitFrom, Reason: got.Err}) // PE 0 read it
	}
	t.initSource = got.Path
	return nil
}

// InitSource names the file Options.InitFrom's weights were read from, and
// what it is: "hf/model.safetensors (Hugging Face)", "ck/ckpt-000000090.safetensors
// (step 90 of llama-tiny)" (the newest intact checkpoint of a directory);
// "" without InitFrom. It is the same on every PE.
func (t *Trainer) InitSource() string { return t.initSource }
