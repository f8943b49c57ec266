package nvshmem

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/internal/cudalib"

	"github.com/symddp/symddp/internal/settings"
)

// UIDFile is the name, in the job's run directory, of the file through which
// PE 0 hands its NVSHMEM unique id to the other PEs.
const UIDFile = "nvshmem.uid"

// uidMagic starts the unique-id file.
var uidMagic = []byte("symddp-nvshmem-uid\x00\x01")

// bootstrap is how this PE starts NVSHMEM.
type bootstrap struct {
	kind       cudalib.Bootstrap
	pe, npes   int
	localPE    int
	singleNode bool
	runDir     string
}

// chooseBootstrap picks the bootstrap: Options["bootstrap"] if given; the
// unique id under the project's launcher (SYMDDP_PE set) or for a lone PE;
// NVSHMEM's MPI (or PMIx) bootstrap under an MPI launcher.
func chooseBootstrap(cfg comm.Config) (bootstrap, error) {
	b := bootstrap{kind: cudalib.UniqueID, pe: cfg.PE, npes: cfg.NPEs, localPE: cfg.PE, singleNode: true, runDir: cfg.RunDir}
	forced := cfg.Options["bootstrap"]
	_, launched := settings.Lookup(comm.EnvPE)
	mpi, underMPI, err := launch.DetectMPI()
	if err != nil {
		return b, fmt.Errorf("nvshmem: %w", err)
	}
	switch {
	case forced == "uid" || (forced == "" && (launched || !underMPI)):
		if b.npes == 0 {
			b.npes = 1
		}
		if err := comm.CheckPE("nvshmem: open", b.pe, b.npes); err != nil {
			return b, err
		}
		if b.npes > 1 && b.runDir == "" {
			return b, fmt.Errorf("nvshmem: PE %d of %d: no run directory (%s) to pass the unique id through: start the job with the launcher (train --pes %d) or mpirun",
				b.pe, b.npes, comm.EnvRunDir, b.npes)
		}
		return b, nil
	case forced == "mpi" || forced == "pmix" || (forced == "" && underMPI):
		b.kind = cudalib.MPI
		if forced == "pmix" || (forced == "" && mpi.Launcher == "pmix") {
			b.kind = cudalib.PMIx
		}
		b.singleNode = false
		if underMPI {
			b.pe, b.npes, b.localPE = mpi.Rank, mpi.Size, mpi.LocalRank
			if b.localPE < 0 {
				b.localPE = mpi.Rank
			}
		}
		b.runDir = ""
		return b, nil
	}
	return b, fmt.Errorf("nvshmem: option bootstrap=%q: want uid, mpi or pmix", forced)
}

// defaults is cfg with backend.Defaults applied. The user's symmetric heap
// is the configured size, else NVSHMEM_SYMMETRIC_SIZE, else DefaultHeapSize.
func defaults(cfg comm.Config) (comm.Config, error) {
	heap := int64(DefaultHeapSize)
	if cfg.HeapSize == 0 {
		if v := os.Getenv("NVSHMEM_SYMMETRIC_SIZE"); v != "" {
			n, err := parseSize(v)
			if err != nil {
				return cfg, fmt.Errorf("nvshmem: NVSHMEM_SYMMETRIC_SIZE=%q: %w", v, err)
			}
			heap = n
		}
	}
	return backend.Defaults(Name, cfg, heap)
}

// parseSize reads a byte count with an optional K, M, G or T suffix (powers
// of 1024), as NVSHMEM's size variables are written.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		case 't', 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v > (1<<62)/mult {
		return 0, errors.New("want a positive byte count such as 2147483648 or 2G")
	}
	return v * mult, nil
}

// exchangeUID gives every PE of a unique-id bootstrap PE 0's unique id:
// PE 0 makes it and, in a job of several PEs, writes it to the run
// directory (a temporary file renamed into place); the others wait for the
// file until the deadline.
func exchangeUID(lib *cudalib.Lib, b bootstrap, timeout time.Duration) ([]byte, error) {
	if b.pe == 0 {
		id, err := lib.UniqueID()
		if err != nil {
			return nil, fmt.Errorf("nvshmem: PE 0: %w", err)
		}
		if b.npes > 1 {
			if err := writeUID(b.runDir, b.npes, id); err != nil {
				return nil, fmt.Errorf("nvshmem: PE 0: %w", err)
			}
		}
		return id, nil
	}
	return readUID(b.runDir, b.pe, b.npes, timeout)
}

func writeUID(dir string, npes int, id []byte) error {
	var buf bytes.Buffer
	buf.Write(uidMagic)
	binary.Write(&buf, binary.LittleEndian, uint32(npes))
	binary.Write(&buf, binary.LittleEndian, uint32(len(id)))
	buf.Write(id)
	f, err := os.CreateTemp(dir, "."+UIDFile+".*")
	if err != nil {
		return fmt.Errorf("unique id: %w", err)
	}
	_, err = f.Write(buf.Bytes())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, UIDFile))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("unique id: %w", err)
	}
	return nil
}

// readUID waits for PE 0's unique-id file and checks it.
func readUID(dir string, pe, npes int, timeout time.Duration) ([]byte, error) {
	path := filepath.Join(dir, UIDFile)
	start := time.Now()
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			return decodeUID(path, data, npes)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("nvshmem: PE %d: unique id: %w", pe, err)
		}
		if time.Since(start) > timeout {
			return nil, &comm.TimeoutError{PE: pe, Op: "bootstrap (waiting for " + path + ")", Missing: []int{0}, Deadline: timeout}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func decodeUID(path string, data []byte, npes int) ([]byte, error) {
	head := len(uidMagic) + 8
	if len(data) < head || !bytes.Equal(data[:len(uidMagic)], uidMagic) {
		return nil, fmt.Errorf("nvshmem: %s is not a unique-id file", path)
	}
	n := binary.LittleEndian.Uint32(data[len(uidMagic):])
	size := binary.LittleEndian.Uint32(data[len(uidMagic)+4:])
	if int(n) != npes {
		return nil, fmt.Errorf("nvshmem: %s is for a job of %d PEs, this one has %d", path, n, npes)
	}
	if int(size) != len(data)-head {
		return nil, fmt.Errorf("nvshmem: %s: unique id of %d bytes, file holds %d", path, size, len(data)-head)
	}
	return data[head:], nil
}
