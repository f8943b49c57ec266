package launch

import (
	"bytes"
	"io"
	"sync"
)

// maxLine is the longest line kept whole; longer ones are cut into pieces.
const maxLine = 64 << 10

// lineWriter forwards what a PE writes to out one whole line at a time, each
// with a prefix, and keeps the last lines for the failure report. The PEs'
// writers share one mutex, so their lines never interleave mid-line.
type lineWriter struct {
	mu      *sync.Mutex
	out     io.Writer
	prefix  string
	partial []byte
	tail    []string // ring of the last len(tail) lines; nil keeps none
	next    int
	count   int
	// crash is the first line of a Go crash report ("panic: ...",
	// "fatal error: ...") and crashAt its number: Tail keeps it when the
	// stack trace after it has pushed it out of the ring, since it is the
	// line that says what went wrong.
	crash   string
	crashAt int
}

func newLineWriter(mu *sync.Mutex, out io.Writer, prefix string, keep int) *lineWriter {
	w := &lineWriter{mu: mu, out: out, prefix: prefix}
	if keep > 0 {
		w.tail = make([]string, keep)
	}
	return w
}

// Write forwards every complete line of p and keeps the rest for later.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.partial = append(w.partial, p...)
			if len(w.partial) >= maxLine {
				w.emit(w.partial)
				w.partial = w.partial[:0]
			}
			break
		}
		line := p[:i]
		if len(w.partial) > 0 {
			line = append(w.partial, line...)
			w.partial = w.partial[:0]
		}
		w.emit(line)
		p = p[i+1:]
	}
	return n, nil
}

// emit writes one line (without its newline). The caller holds mu. Errors
// writing to out are dropped: a closed terminal must not stop the job.
func (w *lineWriter) emit(line []byte) {
	buf := make([]byte, 0, len(w.prefix)+len(line)+1)
	buf = append(append(append(buf, w.prefix...), line...), '\n')
	w.out.Write(buf)
	if w.tail != nil {
		if w.crash == "" && (bytes.HasPrefix(line, []byte("panic: ")) || bytes.HasPrefix(line, []byte("fatal error: "))) {
			w.crash, w.crashAt = string(line), w.count
		}
		w.tail[w.next] = string(line)
		w.next = (w.next + 1) % len(w.tail)
		w.count++
	}
}

// Flush forwards an unterminated last line.
func (w *lineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.emit(w.partial)
		w.partial = w.partial[:0]
	}
}

// Tail returns the last lines written, oldest first, led by the first
// line of a Go crash report (then "...") when that line is older than them.
func (w *lineWriter) Tail() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := min(w.count, len(w.tail))
	out := make([]string, 0, k+2)
	if w.crash != "" && w.crashAt < w.count-k {
		out = append(out, w.crash, "...")
	}
	for i := 0; i < k; i++ {
		out = append(out, w.tail[(w.next-k+i+len(w.tail))%len(w.tail)])
	}
	return out
}
