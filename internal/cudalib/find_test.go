package cudalib

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCandidatesExplicitOnly(t *testing.T) {
	t.Setenv(EnvLib, "/elsewhere/lib.so")
	got := Candidates("/opt/x/libsymddp_cuda.so")
	if len(got) != 1 || got[0] != "/opt/x/libsymddp_cuda.so" {
		t.Fatalf("Candidates(explicit) = %q, want only the explicit path", got)
	}
}

func TestCandidatesOrder(t *testing.T) {
	t.Setenv(EnvLib, "/from/env/libsymddp_cuda.so")
	exe, err := os.Executable()
	if err != nil {
		t.Skip("no executable path:", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	got := Candidates("")
	want := []string{
		"/from/env/libsymddp_cuda.so",
		filepath.Join(filepath.Dir(exe), LibName),
		filepath.Join(wd, "build", LibName),             // internal/cudalib/build
		filepath.Join(wd, "..", "build", LibName),       // internal/build
		filepath.Join(wd, "..", "..", "build", LibName), // the module root's build
	}
	if len(got) != len(want) {
		t.Fatalf("Candidates(\"\") = %q, want %q", got, want)
	}
	for i := range want {
		if filepath.Clean(got[i]) != filepath.Clean(want[i]) {
			t.Errorf("candidate %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestCandidatesWithoutEnv(t *testing.T) {
	t.Setenv(EnvLib, "")
	for _, c := range Candidates("") {
		if c == "" {
			t.Fatalf("an empty candidate in %q", Candidates(""))
		}
	}
}
