package nvshmem

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/internal/cudalib"
)

// clearLauncherEnv unsets the variables that chooseBootstrap reads, for the
// duration of the test.
func clearLauncherEnv(t *testing.T) {
	for _, name := range []string{comm.EnvPE, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "NVSHMEM_SYMMETRIC_SIZE"} {
		if v, ok := os.LookupEnv(name); ok {
			t.Cleanup(func() { os.Setenv(name, v) })
			os.Unsetenv(name)
		}
	}
}

func TestBootstrapLonePE(t *testing.T) {
	clearLauncherEnv(t)
	b, err := chooseBootstrap(comm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if b.kind != cudalib.UniqueID || b.pe != 0 || b.npes != 1 || !b.singleNode {
		t.Fatalf("lone PE: %+v", b)
	}
}

func TestBootstrapLauncher(t *testing.T) {
	clearLauncherEnv(t)
	t.Setenv(comm.EnvPE, "2")
	t.Setenv("OMPI_COMM_WORLD_RANK", "5") // the launcher wins over a stray MPI variable
	b, err := chooseBootstrap(comm.Config{PE: 2, NPEs: 4, RunDir: "/run/job"})
	if err != nil {
		t.Fatal(err)
	}
	if b.kind != cudalib.UniqueID || b.pe != 2 || b.npes != 4 || b.localPE != 2 || b.runDir != "/run/job" {
		t.Fatalf("launcher PE: %+v", b)
	}
}

func TestBootstrapNeedsRunDir(t *testing.T) {
	clearLauncherEnv(t)
	_, err := chooseBootstrap(comm.Config{PE: 1, NPEs: 3})
	if err == nil || !strings.Contains(err.Error(), comm.EnvRunDir) || !strings.Contains(err.Error(), "launcher") {
		t.Fatalf("3 PEs without a run directory: %v", err)
	}
}

func TestBootstrapPERange(t *testing.T) {
	clearLauncherEnv(t)
	if _, err := chooseBootstrap(comm.Config{PE: 3, NPEs: 3, RunDir: "/x"}); !errors.Is(err, comm.ErrPERange) {
		t.Fatalf("PE 3 of 3: %v, want ErrPERange", err)
	}
}

func TestBootstrapOpenMPI(t *testing.T) {
	clearLauncherEnv(t)
	t.Setenv("OMPI_COMM_WORLD_RANK", "5")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "16")
	t.Setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
	b, err := chooseBootstrap(comm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if b.kind != cudalib.MPI || b.pe != 5 || b.npes != 16 || b.localPE != 1 || b.singleNode || b.runDir != "" {
		t.Fatalf("under mpirun: %+v", b)
	}
}

func TestBootstrapPMIx(t *testing.T) {
	clearLauncherEnv(t)
	t.Setenv("PMIX_RANK", "3")
	b, err := chooseBootstrap(comm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if b.kind != cudalib.PMIx || b.pe != 3 || b.localPE != 3 {
		t.Fatalf("under PMIx: %+v", b)
	}
}

func TestBootstrapForced(t *testing.T) {
	clearLauncherEnv(t)
	b, err := chooseBootstrap(comm.Config{Options: map[string]string{"bootstrap": "mpi"}})
	if err != nil || b.kind != cudalib.MPI {
		t.Fatalf("bootstrap=mpi: %+v, %v", b, err)
	}
	if _, err := chooseBootstrap(comm.Config{Options: map[string]string{"bootstrap": "carrier-pigeon"}}); err == nil || !strings.Contains(err.Error(), "carrier-pigeon") {
		t.Fatalf("unknown bootstrap: %v", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1073741824": 1 << 30, "2G": 2 << 30, "512m": 512 << 20, " 64K ": 64 << 10, "1T": 1 << 40} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1", "0", "1.5G", "12X"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) succeeded", in)
		}
	}
}

// heapSize is the heap size that defaults gives a Config of HeapSize
// configured.
func heapSize(configured int64) (int64, error) {
	cfg, err := defaults(comm.Config{HeapSize: configured})
	return cfg.HeapSize, err
}

func TestHeapSize(t *testing.T) {
	clearLauncherEnv(t)
	if n, err := heapSize(0); err != nil || n != DefaultHeapSize {
		t.Fatalf("default heap: %d, %v", n, err)
	}
	if n, err := heapSize(12345); err != nil || n != 12345 {
		t.Fatalf("configured heap: %d, %v", n, err)
	}
	t.Setenv("NVSHMEM_SYMMETRIC_SIZE", "3G")
	if n, err := heapSize(0); err != nil || n != 3<<30 {
		t.Fatalf("heap from NVSHMEM_SYMMETRIC_SIZE: %d, %v", n, err)
	}
	t.Setenv("NVSHMEM_SYMMETRIC_SIZE", "lots")
	if _, err := heapSize(0); err == nil || !strings.Contains(err.Error(), "NVSHMEM_SYMMETRIC_SIZE") {
		t.Fatalf("bad NVSHMEM_SYMMETRIC_SIZE: %v", err)
	}
	if _, err := heapSize(-1); err == nil {
		t.Fatal("negative heap accepted")
	}
}

func TestUIDFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	id := []byte("0123456789abcdef-an-id")
	if err := writeUID(dir, 4, id); err != nil {
		t.Fatal(err)
	}
	got, err := readUID(dir, 3, 4, time.Second)
	if err != nil || string(got) != string(id) {
		t.Fatalf("readUID = %q, %v", got, err)
	}
	if _, err := readUID(dir, 1, 8, time.Second); err == nil || !strings.Contains(err.Error(), "job of 4 PEs") {
		t.Fatalf("reading a 4-PE id in an 8-PE job: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != UIDFile {
		t.Fatalf("run directory holds %v, want only %s", entries, UIDFile)
	}
	if err := os.WriteFile(filepath.Join(dir, UIDFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readUID(dir, 1, 4, time.Second); err == nil || !strings.Contains(err.Error(), "not a unique-id file") {
		t.Fatalf("reading garbage: %v", err)
	}
}

func TestUIDWaitTimesOutNamingPE0(t *testing.T) {
	_, err := readUID(t.TempDir(), 2, 4, 30*time.Millisecond)
	var te *comm.TimeoutError
	if !errors.As(err, &te) || te.PE != 2 || len(te.Missing) != 1 || te.Missing[0] != 0 {
		t.Fatalf("waiting for a unique id that never comes: %v", err)
	}
}
