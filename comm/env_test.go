package comm

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func lookupIn(env []string) func(string) (string, bool) {
	m := map[string]string{}
	for _, kv := range env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				m[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigRoundTripsThroughTheEnvironment(t *testing.T) {
	in := Config{PE: 2, NPEs: 4, HeapName: "/dev/shm/symddp-1-ab", HeapSize: 1 << 26, Timeout: 90 * time.Second, RunDir: "/tmp/run"}
	cfg, backend, isPE, err := ConfigFromLookup(lookupIn(in.Environ("shm")))
	if err != nil || !isPE || backend != "shm" {
		t.Fatalf("got %v, %q, %v", err, backend, isPE)
	}
	if cfg.PE != in.PE || cfg.NPEs != in.NPEs || cfg.HeapName != in.HeapName || cfg.HeapSize != in.HeapSize || cfg.Timeout != in.Timeout || cfg.RunDir != in.RunDir {
		t.Errorf("round trip gave %+v, want %+v", cfg, in)
	}
}

// TestPEVarsAreWhatEnvironWrites: PEVars names, in order, the variables of
// a Config with every field set.
func TestPEVarsAreWhatEnvironWrites(t *testing.T) {
	in := Config{PE: 2, NPEs: 4, HeapName: "heap", HeapSize: 1 << 26, Timeout: time.Minute, RunDir: "/tmp/run"}
	var names []string
	for _, kv := range in.Environ("shm") {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	if !slices.Equal(names, PEVars) {
		t.Errorf("Environ writes %v; PEVars is %v", names, PEVars)
	}
}

func TestConfigFromLookupOutsideAJob(t *testing.T) {
	cfg, backend, isPE, err := ConfigFromLookup(lookupIn(nil))
	if err != nil || isPE || backend != "" || cfg.NPEs != 0 {
		t.Errorf("no SYMDDP_PE: got %+v, %q, %v, %v", cfg, backend, isPE, err)
	}
}

func TestConfigFromLookupRejectsBadValues(t *testing.T) {
	for _, env := range [][]string{
		{"SYMDDP_PE=0"},
		{"SYMDDP_PE=x", "SYMDDP_NPES=2"},
		{"SYMDDP_PE=0", "SYMDDP_NPES=0"},
		{"SYMDDP_PE=0", "SYMDDP_NPES=2", "SYMDDP_HEAP_SIZE=-5"},
		{"SYMDDP_PE=0", "SYMDDP_NPES=2", "SYMDDP_TIMEOUT=soon"},
	} {
		if _, _, isPE, err := ConfigFromLookup(lookupIn(env)); err == nil || !isPE {
			t.Errorf("%v: got isPE %v, error %v; want an error", env, isPE, err)
		}
	}
	_, _, _, err := ConfigFromLookup(lookupIn([]string{"SYMDDP_PE=2", "SYMDDP_NPES=2"}))
	if !errors.Is(err, ErrPERange) {
		t.Errorf("PE 2 of 2: %v, want ErrPERange", err)
	}
}

func TestDesyncChecking(t *testing.T) {
	for v, want := range map[string]bool{"": true, "on": true, "1": true, "TRUE": true, "off": false, " 0 ": false, "false": false} {
		got, err := desyncChecking(v)
		if err != nil || got != want {
			t.Errorf("%s=%q: got %v, %v; want %v", EnvDesyncCheck, v, got, err, want)
		}
	}
	_, err := desyncChecking("maybe")
	if err == nil || err.Error() != `comm: SYMDDP_DESYNC_CHECK="maybe": want on or off` {
		t.Errorf(`"maybe": got %v`, err)
	}
}
