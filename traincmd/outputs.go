package traincmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/internal/outdir"
)

// checkOutputs makes sure, before any PE starts, that what the run will
// write can be written: the metrics file can be opened, and the checkpoint
// directory exists (it is created) and takes a file. A run must not train
// for hours and then lose its results at the first save. Each failure is a
// usage error (exit 2); so is a --resume file that does not exist. undo
// removes the directories the check created, for a run that stops before
// any PE starts (a bad --data-dir found after it).
func checkOutputs(o *options, stderr io.Writer) (undo func(), err error) {
	undo = func() {}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	if o.resume != "" && o.resume != "latest" {
		// a checkpoint file named by the user: a missing one is one line
		// here, not every PE's error after it started
		if _, err := os.Stat(o.resume); err != nil {
			return undo, inputf("--resume %s: %v", o.resume, unwrapPath(err))
		}
	}
	if o.initFrom != "" {
		if _, err := os.Stat(o.initFrom); err != nil {
			return undo, inputf("--init-from %s: %v", o.initFrom, unwrapPath(err))
		}
	}
	if o.ckptDir != "" {
		made, err := probeDir(o.ckptDir)
		undo = made.RemoveEmpty
		if err != nil {
			return undo, inputf("--checkpoint-dir %s: %v", o.ckptDir, err)
		}
		if o.resume == "" {
			if err := ddp.CheckFreshCheckpointDir(o.ckptDir); err != nil {
				what := "add --resume latest to go on from there, or name another --checkpoint-dir"
				if o.initFrom != "" {
					what = "name another --checkpoint-dir for a run from --init-from"
				}
				return undo, inputf("--checkpoint-dir %s: %v: %s", o.ckptDir, err, what)
			}
		}
	}
	if o.metrics != "" {
		fi, statErr := os.Stat(o.metrics)
		if statErr == nil && fi.Mode().IsRegular() && fi.Size() > 0 && o.resume == "" && !o.evalOnly {
			fmt.Fprintf(stderr, "warning: --metrics %s holds %s of an earlier run, which this run replaces (name another file to keep them; --eval-only and --resume add to it)\n",
				o.metrics, metricsRecords(o.metrics))
		}
		f, err := os.OpenFile(o.metrics, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return undo, inputf("--metrics %s: %v", o.metrics, unwrapPath(err))
		}
		f.Close()
		if errors.Is(statErr, os.ErrNotExist) {
			os.Remove(o.metrics) // PE 0 creates it; leave nothing if the run never starts
		}
	}
	return undo, nil
}

// metricsRecords says how many records (lines) the metrics log at path
// holds: "7 records".
func metricsRecords(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "records"
	}
	n := bytes.Count(b, []byte("\n"))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	if n == 1 {
		return "1 record"
	}
	return fmt.Sprintf("%d records", n)
}

// probeDir creates dir and writes, syncs and removes a small file in it. It
// returns the directories it created.
func probeDir(dir string) (made outdir.Missing, err error) {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, errors.New("it exists and is not a directory")
	}
	made = outdir.Of(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return made, fmt.Errorf("cannot create it: %w", unwrapPath(err))
	}
	// the name of a checkpoint's temporary file, which the next save
	// removes should this one be left behind
	f, err := os.CreateTemp(dir, ".ckpt-probe-*.tmp")
	if err != nil {
		return made, fmt.Errorf("cannot write in it: %w", unwrapPath(err))
	}
	defer os.Remove(f.Name())
	_, err = f.Write([]byte("symddp\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return made, fmt.Errorf("cannot write in it: %w", unwrapPath(err))
	}
	return made, nil
}
