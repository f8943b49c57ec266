package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"github.com/symddp/symddp/internal/units"
)

// row is one line of the allreduce table.
type row struct {
	npes  int
	bytes int64
	shm   result
	mpi   *result // nil when Open MPI was not measured
}

// busbw is the bus bandwidth in GB/s: bytes·2(N−1)/N per second, the traffic
// each PE's link would carry in a ring allreduce.
func busbw(bytes int64, npes int, seconds float64) float64 {
	if seconds <= 0 || npes < 2 {
		return 0
	}
	n := float64(npes)
	return float64(bytes) * 2 * (n - 1) / n / seconds / 1e9
}

func printTable(w io.Writer, opts allReduceOpts, host, load string, rows []row, note string) error {
	fmt.Fprintf(w, "allreduce, float32 sum in place; busbw = bytes·2(N−1)/N / time\n")
	fmt.Fprintf(w, "time per call = median of %d repetitions of ~%v, each the slowest PE's\n", opts.reps, opts.target)
	fmt.Fprintf(w, "host: %s\n", host)
	fmt.Fprintf(w, "measured: %s\n", load)
	if note != "" {
		fmt.Fprintf(w, "note: %s\n", note)
	}
	fmt.Fprintln(w)
	head := []string{"N", "size", "shm time", "shm busbw", "MPI time", "MPI busbw", "shm/MPI"}
	lines := [][]string{}
	for _, r := range rows {
		shmBW := busbw(r.bytes, r.npes, r.shm.seconds)
		line := []string{fmt.Sprint(r.npes), units.Bytes(r.bytes), formatTime(r.shm.seconds), fmt.Sprintf("%.2f GB/s", shmBW), "-", "-", "-"}
		if r.mpi != nil {
			line[4] = formatTime(r.mpi.seconds)
			line[5] = fmt.Sprintf("%.2f GB/s", busbw(r.bytes, r.npes, r.mpi.seconds))
			line[6] = fmt.Sprintf("%.2f×", r.mpi.seconds/r.shm.seconds)
		}
		lines = append(lines, line)
	}
	return writeTable(w, opts.format, 3, head, lines)
}

// writeTable writes a table of the column names head and the rows lines,
// as a markdown table (format "markdown") or as text in right-aligned
// columns pad spaces apart.
func writeTable(w io.Writer, format string, pad int, head []string, lines [][]string) error {
	if format == "markdown" {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---:|", len(head)))
		for _, l := range lines {
			fmt.Fprintf(w, "| %s |\n", strings.Join(l, " | "))
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, pad, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t\n", strings.Join(head, "\t"))
	for _, l := range lines {
		fmt.Fprintf(tw, "%s\t\n", strings.Join(l, "\t"))
	}
	return tw.Flush()
}

func formatTime(s float64) string {
	switch {
	case s < 1e-3:
		return fmt.Sprintf("%.1f µs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.2f ms", s*1e3)
	}
	return fmt.Sprintf("%.2f s", s)
}

// describeHost is one line: processor, CPUs, kernel, Go and MPI versions.
func describeHost(mpi *mpiRunner) string {
	model := "unknown processor"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	kernel := runtime.GOOS
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		kernel = "Linux " + unix.ByteSliceToString(u.Release[:])
	}
	s := fmt.Sprintf("%s, %d CPUs, %s, %s", model, runtime.NumCPU(), kernel, runtime.Version())
	if mpi != nil {
		s += "; " + mpi.describe()
	}
	return s
}
