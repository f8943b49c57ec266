// Package blas picks the BLAS that symddp's CPU engine and gorgonia's tensor
// operations run on: OpenBLAS, loaded with dlopen at run time when the
// library is installed (Debian's libopenblas0) and the binary was built with
// cgo, or gonum's pure-Go implementation otherwise.
//
// Both are served by one type, BLAS, which embeds gonum's Implementation (so
// it satisfies gorgonia's tensor.BLAS) and replaces Sgemm: with OpenBLAS's
// cblas_sgemm when the library is loaded, and with an allocation-free tiled
// driver of gonum's serial kernels otherwise (gonum's own Sgemm starts a
// goroutine per tile and allocates on every large call).
//
// The environment variable SYMDDP_BLAS (auto, openblas or gonum) chooses
// between them; see FromEnv.
package blas

import (
	"fmt"
	"strings"
	"sync"

	"gonum.org/v1/gonum/blas/gonum"

	"github.com/symddp/symddp/internal/settings"
)

// Kind names a BLAS implementation.
type Kind string

// Kinds. Auto means OpenBLAS when it can be loaded, gonum otherwise.
const (
	Auto     Kind = "auto"
	OpenBLAS Kind = "openblas"
	Gonum    Kind = "gonum"
)

// EnvVar is the environment variable that FromEnv reads.
const EnvVar = settings.BLAS

// ParseKind reads a kind; the empty string is Auto.
func ParseKind(s string) (Kind, error) {
	switch k := Kind(strings.ToLower(strings.TrimSpace(s))); k {
	case "":
		return Auto, nil
	case Auto, OpenBLAS, Gonum:
		return k, nil
	}
	return "", fmt.Errorf("blas: unknown BLAS %q (want auto, openblas or gonum)", s)
}

// FromEnv returns the kind named by $SYMDDP_BLAS, Auto when it is unset.
func FromEnv() (Kind, error) {
	k, err := ParseKind(settings.Get(EnvVar))
	if err != nil {
		return "", fmt.Errorf("$%s: %w", EnvVar, err)
	}
	return k, nil
}

// BLAS is gonum's pure-Go BLAS with Sgemm served by OpenBLAS or by the tiled
// driver. It implements gorgonia's tensor.BLAS. A BLAS is shared by the whole
// process (Load returns one instance per kind); its methods are safe for
// concurrent use.
type BLAS struct {
	gonum.Implementation

	kind   Kind
	lib    *library // loaded OpenBLAS; nil for Gonum
	tiles  *tiler   // gonum's kernels, tile by tile; nil for OpenBLAS
	reason string   // why Auto fell back to gonum, for String
}

var (
	gonumOnce sync.Once
	gonumBLAS *BLAS

	openOnce  sync.Once
	openBLAS  *BLAS
	openErr   error // wrapped, for Load(OpenBLAS)
	openCause string
)

// Load returns the process-wide BLAS of kind k. OpenBLAS fails when the
// library cannot be loaded (or the binary was built without cgo); Auto then
// falls back to gonum and says why in String.
func Load(k Kind) (*BLAS, error) {
	switch k {
	case Gonum:
		return loadGonum(), nil
	case OpenBLAS:
		return loadOpenBLASOnce()
	case Auto, "":
		if lim, ok := addressSpaceLimit(); ok {
			// OpenBLAS 0.3.21 retries the mmap of a GEMM's work buffer
			// without end when the limit refuses it: a run hung at full
			// CPU without a word
			g := *loadGonum()
			g.reason = fmt.Sprintf("the address space is limited to %d MiB (ulimit -v), under which OpenBLAS spins when it cannot map its buffers; SYMDDP_BLAS=openblas to use it anyway", lim>>20)
			return &g, nil
		}
		b, err := loadOpenBLASOnce()
		if err == nil {
			return b, nil
		}
		g := *loadGonum() // a copy that carries the reason; tiles are shared
		g.reason = openCause
		return &g, nil
	}
	return nil, fmt.Errorf("blas: unknown BLAS %q (want auto, openblas or gonum)", string(k))
}

// addressSpaceLimit is the process's address-space limit (RLIMIT_AS) and
// whether there is one (a variable for tests).
var addressSpaceLimit = rlimitAS

func loadGonum() *BLAS {
	gonumOnce.Do(func() {
		gonumBLAS = &BLAS{kind: Gonum, tiles: newTiler(1)}
	})
	return gonumBLAS
}

func loadOpenBLASOnce() (*BLAS, error) {
	openOnce.Do(func() {
		lib, err := loadOpenBLAS()
		if err != nil {
			openErr, openCause = fmt.Errorf("blas: load OpenBLAS: %w", err), err.Error()
			return
		}
		openBLAS = &BLAS{kind: OpenBLAS, lib: lib}
	})
	return openBLAS, openErr
}

// Kind is OpenBLAS or Gonum.
func (b *BLAS) Kind() Kind { return b.kind }

// SetThreads sets how many threads one Sgemm may use; n <= 0 leaves the
// current setting. For OpenBLAS the setting is the library's and therefore
// process-wide; for gonum it is this kind's worker pool, also process-wide.
func (b *BLAS) SetThreads(n int) {
	if n <= 0 {
		return
	}
	if b.lib != nil {
		b.lib.setThreads(n)
		return
	}
	b.tiles.setThreads(n)
}

// Threads is the number of threads one Sgemm may use.
func (b *BLAS) Threads() int {
	if b.lib != nil {
		return b.lib.threads()
	}
	return b.tiles.threadCount()
}

// String describes the BLAS in one line, for the log:
// "OpenBLAS 0.3.21 ... (libopenblas.so.0), 1 thread" or
// "gonum pure-Go BLAS, 1 thread (OpenBLAS not loaded: ...)".
func (b *BLAS) String() string {
	th := fmt.Sprintf("%d thread", b.Threads())
	if b.Threads() != 1 {
		th += "s"
	}
	if b.lib != nil {
		return fmt.Sprintf("%s (%s), %s", b.lib.config(), b.lib.path, th)
	}
	s := "gonum pure-Go BLAS, " + th
	if b.reason != "" {
		s += " (OpenBLAS not loaded: " + b.reason + ")"
	}
	return s
}
