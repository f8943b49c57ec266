package datasets

import "runtime"

// ConcurrentSource is a Source whose GatherBatch may run on several
// goroutines at once for one batch, each call with its own run of rows:
// disjoint parts of idx gathered into the matching, disjoint rows of the
// batch. Source alone does not promise it (a source may decode through
// scratch memory of its own), so Gatherer splits only the batches of the
// sources that say so. InMemory, ByteSamples and TokenSource do: they only
// read memory that does not change while they are in use; so does
// SyntheticTokens, whose tokens are a function of their position.
type ConcurrentSource interface {
	Source
	// GathersConcurrently returns the source that makes the promise: the
	// receiver itself, a pointer. A type that embeds a ConcurrentSource
	// (and may override its GatherBatch) inherits the method, but what it
	// returns is the embedded source, not the type itself, so Gatherer
	// does not split the type's batches.
	GathersConcurrently() Source
}

// GathersConcurrently returns d: InMemory is a ConcurrentSource.
func (d *InMemory) GathersConcurrently() Source { return d }

// GathersConcurrently returns d: ByteSamples is a ConcurrentSource.
func (d *ByteSamples) GathersConcurrently() Source { return d }

// GathersConcurrently returns d: TokenSource is a ConcurrentSource.
func (d *TokenSource) GathersConcurrently() Source { return d }

// GathersConcurrently returns d: SyntheticTokens is a ConcurrentSource.
func (d *SyntheticTokens) GathersConcurrently() Source { return d }

// SplitBytes is the size of a batch (its inputs and targets as gathered,
// 4 bytes a value) from which Gatherer splits it.
const SplitBytes = 256 << 10

// maxGatherParts bounds the goroutines of one gather: a few saturate the
// memory bandwidth a copy or a table decode needs.
const maxGatherParts = 4

// Gatherer gathers batches of a Source as its GatherBatch does, but splits
// a batch of SplitBytes or more from a ConcurrentSource into runs of rows
// (at least SplitBytes/2 each) gathered at once by up to
// min(GOMAXPROCS, 4) goroutines, the caller's among them. The bytes are the
// same as one GatherBatch call's. Its goroutines start with the first split
// batch and stay until Close, so that a Gather allocates nothing. One
// goroutine uses a Gatherer at a time.
type Gatherer struct {
	tokens          bool
	inSize, targets int
	split           int // batch bytes from which to split (tests: 0 always splits)
	maxParts        int
	jobs            chan gatherJob
	done            chan any // a worker's panic, or nil, per job
	started, closed bool
	cleanup         runtime.Cleanup // ends the workers of a Gatherer dropped without Close
}

// gatherJob is one worker's run of rows.
type gatherJob struct {
	src Source
	idx []int
	b   Batch
}

// NewGatherer returns a Gatherer for batches of samples of spec (the
// Spec of the sources it will gather from).
func NewGatherer(spec Spec) *Gatherer {
	return &Gatherer{
		tokens:   spec.Tokens,
		inSize:   spec.InputSize(),
		targets:  max(spec.Targets, 1),
		split:    SplitBytes,
		maxParts: min(runtime.GOMAXPROCS(0), maxGatherParts),
	}
}

// Gather copies samples idx[i] of src into row i of b, as
// src.GatherBatch(idx, b) does. A panic of GatherBatch on any run of rows
// (a bad index) is raised here once every run is done.
func (g *Gatherer) Gather(src Source, idx []int, b Batch) {
	rows := len(idx)
	parts := g.parts(src, b, rows)
	if parts < 2 {
		src.GatherBatch(idx, b)
		return
	}
	g.start()
	per := (rows + parts - 1) / parts
	sent := 0
	for lo := per; lo < rows; lo += per {
		hi := min(lo+per, rows)
		g.jobs <- gatherJob{src: src, idx: idx[lo:hi], b: g.rows(b, lo, hi)}
		sent++
	}
	p := gatherRun(src, idx[:per], g.rows(b, 0, per))
	for range sent {
		if r := <-g.done; p == nil {
			p = r
		}
	}
	if p != nil {
		panic(p)
	}
}

// parts is the number of runs to split a batch of rows into (1: none).
func (g *Gatherer) parts(src Source, b Batch, rows int) int {
	if g.maxParts < 2 || g.closed {
		return 1
	}
	if cs, ok := src.(ConcurrentSource); !ok || cs.GathersConcurrently() != src {
		return 1
	}
	in := len(b.X)
	if g.tokens {
		in = len(b.Tokens)
	}
	if in < rows*g.inSize || len(b.Y) < rows*g.targets {
		return 1 // GatherBatch says what is too short
	}
	bytes := 4 * rows * (g.inSize + g.targets)
	if bytes < g.split {
		return 1
	}
	return min(g.maxParts, rows, max(2, bytes/max(g.split/2, 1)))
}

// rows is rows [lo, hi) of b.
func (g *Gatherer) rows(b Batch, lo, hi int) Batch {
	r := Batch{Y: b.Y[lo*g.targets : hi*g.targets]}
	if g.tokens {
		r.Tokens = b.Tokens[lo*g.inSize : hi*g.inSize]
	} else {
		r.X = b.X[lo*g.inSize : hi*g.inSize]
	}
	return r
}

// start starts the workers (once).
func (g *Gatherer) start() {
	if g.started {
		return
	}
	g.started = true
	n := g.maxParts - 1
	jobs, done := make(chan gatherJob, n), make(chan any, n)
	g.jobs, g.done = jobs, done
	for range n {
		go func() {
			for j := range jobs {
				done <- gatherRun(j.src, j.idx, j.b)
			}
		}()
	}
	g.cleanup = runtime.AddCleanup(g, func(ch chan gatherJob) { close(ch) }, jobs)
}

// gatherRun gathers one run of rows and returns what it panicked with.
func gatherRun(src Source, idx []int, b Batch) (p any) {
	defer func() { p = recover() }()
	src.GatherBatch(idx, b)
	return nil
}

// Close ends the workers; a later Gather does not split. A second Close
// does nothing.
func (g *Gatherer) Close() {
	if g.started && !g.closed {
		g.cleanup.Stop()
		close(g.jobs)
	}
	g.closed = true
}
