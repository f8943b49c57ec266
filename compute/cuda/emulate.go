package cuda

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/symddp/symddp/compute/internal/kernels"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/vec"
	"github.com/symddp/symddp/optim"
)

// NewEmulated returns an engine whose device is emulated on the host: the
// engine's own logic (tensors, pool, staging, pipeline, capture, optimizer
// state) runs for real, over host memory, with reference kernels written in
// Go that follow the CUDA kernels' arithmetic (float32 round-to-nearest
// steps of the optimizers, double sums of the loss). Streams and events are
// immediate; a captured "graph" is the list of recorded operations, replayed
// by Launch with the step block's new values. It needs no GPU, library or
// cgo: it is for tests of code that drives the CUDA engine (ddp's GPU path)
// on machines without a GPU. GEMM sums in float64, so results agree with
// the CPU engine to float32 rounding, not bit for bit.
func NewEmulated(opts Options) *Engine {
	e, _ := newEngine(newEmuDevice(), opts)
	return e
}

// emuDevice implements device on the host.
type emuDevice struct {
	mu       sync.Mutex
	allocs   []emuAlloc // sorted by base
	status   uintptr
	block    cudalib.StepValues
	capture  bool
	recorded []func()
	graphs   map[uint64][]func()
	nextID   uint64
	lt       emuLt
}

type emuAlloc struct {
	base uintptr
	buf  []uint32
}

func newEmuDevice() *emuDevice {
	d := &emuDevice{graphs: map[uint64][]func(){}, nextID: 1}
	d.status, _ = d.DevAlloc(4 * cudalib.StatusWords)
	return d
}

// mem returns n 32-bit words at device address p.
func (d *emuDevice) mem(p uintptr, n int) []uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := sort.Search(len(d.allocs), func(i int) bool { return d.allocs[i].base > p }) - 1
	if i < 0 {
		panic(fmt.Sprintf("emulated device: address %#x not allocated", p))
	}
	a := d.allocs[i]
	off := int(p-a.base) / 4
	if int(p-a.base)%4 != 0 || off+n > len(a.buf) {
		panic(fmt.Sprintf("emulated device: %d words at %#x outside an allocation of %d words", n, p, len(a.buf)))
	}
	return a.buf[off : off+n]
}

func (d *emuDevice) f32(p uintptr, n int) []float32 {
	w := d.mem(p, n)
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&w[0])), n)
}

func (d *emuDevice) i32(p uintptr, n int) []int32 {
	w := d.mem(p, n)
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&w[0])), n)
}

func (d *emuDevice) Info() cudalib.ContextInfo {
	return cudalib.ContextInfo{Stream: 1, CopyStream: 2, Status: d.status, SMCount: 1, OwnsStream: true}
}
func (d *emuDevice) DeviceName() (string, error) { return "emulated GPU", nil }
func (d *emuDevice) Close() error                { return nil }

func (d *emuDevice) DevAlloc(bytes int) (uintptr, error) {
	if d.capture {
		return 0, errors.New("emulated device: allocation while capturing")
	}
	buf := make([]uint32, (bytes+3)/4+1)
	base := uintptr(unsafe.Pointer(&buf[0]))
	d.mu.Lock()
	d.allocs = append(d.allocs, emuAlloc{base: base, buf: buf})
	sort.Slice(d.allocs, func(i, j int) bool { return d.allocs[i].base < d.allocs[j].base })
	d.mu.Unlock()
	return base, nil
}

func (d *emuDevice) DevFree(p uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, a := range d.allocs {
		if a.base == p {
			d.allocs = append(d.allocs[:i], d.allocs[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("emulated device: free of %#x", p)
}

func (d *emuDevice) HostAlloc(bytes int) (unsafe.Pointer, error) {
	buf := make([]uint64, (bytes+7)/8+1)
	return unsafe.Pointer(&buf[0]), nil
}
func (d *emuDevice) HostFree(p unsafe.Pointer) error { return nil }

func (d *emuDevice) Zero(dst uintptr, bytes int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { clear(d.mem(dst, bytes/4)) })
		return nil
	}
	clear(d.mem(dst, bytes/4))
	return nil
}

func (d *emuDevice) Copy(dst, src uintptr, bytes int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { copy(d.mem(dst, bytes/4), d.mem(src, bytes/4)) })
		return nil
	}
	copy(d.mem(dst, bytes/4), d.mem(src, bytes/4))
	return nil
}

func (d *emuDevice) HtoD(onCopy bool, dst uintptr, src unsafe.Pointer, bytes int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.htoD(onCopy, dst, src, bytes) })
		return nil
	}
	d.htoD(onCopy, dst, src, bytes)
	return nil
}

func (d *emuDevice) htoD(onCopy bool, dst uintptr, src unsafe.Pointer, bytes int) {
	copy(d.mem(dst, bytes/4), unsafe.Slice((*uint32)(src), bytes/4))
}

func (d *emuDevice) DtoH(onCopy bool, dst unsafe.Pointer, src uintptr, bytes int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.dtoH(onCopy, dst, src, bytes) })
		return nil
	}
	d.dtoH(onCopy, dst, src, bytes)
	return nil
}

func (d *emuDevice) dtoH(onCopy bool, dst unsafe.Pointer, src uintptr, bytes int) {
	copy(unsafe.Slice((*uint32)(dst), bytes/4), d.mem(src, bytes/4))
}

func (d *emuDevice) EventCreate() (uint64, error) {
	d.nextID++
	return d.nextID, nil
}
func (d *emuDevice) EventDestroy(ev uint64) error                     { return nil }
func (d *emuDevice) EventRecord(onCopy bool, ev uint64) error         { return nil }
func (d *emuDevice) WaitEvent(onCopy bool, ev uint64) error           { return nil }
func (d *emuDevice) EventSync(ev uint64, timeout time.Duration) error { return nil }
func (d *emuDevice) Sync(timeout time.Duration) error {
	if d.capture {
		return errors.New("emulated device: sync while capturing")
	}
	return nil
}

// Gemm: row-major c (m,n) = alpha op(a) op(b) + beta c, sums in float64.
func (d *emuDevice) Gemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) })
		return nil
	}
	d.gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	return nil
}

func (d *emuDevice) gemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) {
	ar, br := m, k
	if transA {
		ar = k
	}
	if transB {
		br = n
	}
	A, B, C := d.f32(a, ar*lda), d.f32(b, br*ldb), d.f32(c, m*ldc)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				ai, bi := i*lda+l, l*ldb+j
				if transA {
					ai = l*lda + i
				}
				if transB {
					bi = j*ldb + l
				}
				s += float64(A[ai]) * float64(B[bi])
			}
			v := float32(float64(alpha) * s)
			if beta != 0 {
				v += beta * C[i*ldc+j]
			}
			C[i*ldc+j] = v
		}
	}
}

func emuRelu(v float32) float32 {
	if v > 0 || v != v {
		return v
	}
	return 0
}

func (d *emuDevice) BiasAct(y uintptr, rows, cols int, bias uintptr, act cudalib.Activation) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.biasAct(y, rows, cols, bias, act) })
		return nil
	}
	d.biasAct(y, rows, cols, bias, act)
	return nil
}

func (d *emuDevice) biasAct(y uintptr, rows, cols int, bias uintptr, act cudalib.Activation) {
	Y := d.f32(y, rows*cols)
	var bs []float32
	if bias != 0 {
		bs = d.f32(bias, cols)
	}
	for i := range Y {
		v := Y[i]
		if bs != nil {
			v += bs[i%cols]
		}
		if act == cudalib.ReLU {
			v = emuRelu(v)
		}
		Y[i] = v
	}
}

func (d *emuDevice) BiasActBackward(dy, y uintptr, rows, cols int, dbias uintptr, act cudalib.Activation, accumulate bool) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.biasActBackward(dy, y, rows, cols, dbias, act, accumulate) })
		return nil
	}
	d.biasActBackward(dy, y, rows, cols, dbias, act, accumulate)
	return nil
}

func (d *emuDevice) biasActBackward(dy, y uintptr, rows, cols int, dbias uintptr, act cudalib.Activation, accumulate bool) {
	DY := d.f32(dy, rows*cols)
	if act == cudalib.ReLU {
		for i, v := range d.f32(y, rows*cols) {
			if v <= 0 {
				DY[i] = 0
			}
		}
	}
	if dbias == 0 {
		return
	}
	db := d.f32(dbias, cols)
	for j := 0; j < cols; j++ {
		var s float32
		for i := 0; i < rows; i++ {
			s += DY[i*cols+j]
		}
		if accumulate {
			s += db[j]
		}
		db[j] = s
	}
}

func (d *emuDevice) SoftmaxXent(logits, labels uintptr, rows, classes int, dlogits uintptr, scale float32, useBlock bool, stats uintptr) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.softmaxXent(logits, labels, rows, classes, dlogits, scale, useBlock, stats) })
		return nil
	}
	d.softmaxXent(logits, labels, rows, classes, dlogits, scale, useBlock, stats)
	return nil
}

func (d *emuDevice) softmaxXent(logits, labels uintptr, rows, classes int, dlogits uintptr, scale float32, useBlock bool, stats uintptr) {
	if useBlock {
		scale = d.block.LossScale
	}
	X, G := d.f32(logits, rows*classes), d.f32(dlogits, rows*classes)
	L, st := d.i32(labels, rows), d.f32(stats, 3)
	var loss float64
	var correct, labelled int
	for r := 0; r < rows; r++ {
		x, g := X[r*classes:(r+1)*classes], G[r*classes:(r+1)*classes]
		y := int(L[r])
		if y < 0 || y >= classes {
			clear(g)
			continue
		}
		l, hit := kernels.SoftmaxXentRow(x, g, y, scale)
		loss += l
		if hit {
			correct++
		}
		labelled++
	}
	st[0] += float32(loss)
	st[1] += float32(correct)
	st[2] += float32(labelled)
}

func (d *emuDevice) Accumulate(dst, src uintptr, n int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.accumulate(dst, src, n) })
		return nil
	}
	d.accumulate(dst, src, n)
	return nil
}

func (d *emuDevice) accumulate(dst, src uintptr, n int) {
	vec.Acc1(d.f32(dst, n), d.f32(src, n))
}

func (d *emuDevice) Scale(x uintptr, s float32, n int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.scale(x, s, n) })
		return nil
	}
	d.scale(x, s, n)
	return nil
}

func (d *emuDevice) scale(x uintptr, s float32, n int) {
	vec.Scale(d.f32(x, n), s)
}

func (d *emuDevice) SumSquares(x uintptr, n int, timeout time.Duration) (float64, error) {
	if d.capture {
		return 0, errors.New("emulated device: SumSquares while capturing")
	}
	return kernels.SumSquares(d.f32(x, n)), nil
}

// Update follows sdc_update: the gradient check (the sum of squares as
// optim.SumSquares adds it, the clip factor of optim.ClipFactor), then the
// element updates in the kernels' order of float32 operations.
func (d *emuDevice) Update(o cudalib.OptimArgs, v cudalib.StepValues, useBlock bool, params, grads, state0, state1 uintptr, n int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.update(o, v, useBlock, params, grads, state0, state1, n) })
		return nil
	}
	d.update(o, v, useBlock, params, grads, state0, state1, n)
	return nil
}

func (d *emuDevice) update(o cudalib.OptimArgs, v cudalib.StepValues, useBlock bool, params, grads, state0, state1 uintptr, n int) {
	if useBlock {
		v = d.block
	}
	P, G := d.f32(params, n), d.f32(grads, n)
	var S0, S1 []float32
	if state0 != 0 {
		S0 = d.f32(state0, n)
	}
	if state1 != 0 {
		S1 = d.f32(state1, n)
	}
	st := d.f32(d.status, cudalib.StatusWords)
	sum := optim.SumSquares(G)
	norm := math.Sqrt(sum)
	halted := st[cudalib.StatusHalted] != 0
	skip := halted || math.IsNaN(sum) || math.IsInf(sum, 0)
	scale := float32(1)
	if o.MaxNorm > 0 {
		scale, _ = optim.ClipFactor(norm, o.MaxNorm)
	}
	st[cudalib.StatusSkipped], st[cudalib.StatusScale], st[cudalib.StatusNorm] = b2f(skip), scale, float32(norm)
	st[cudalib.StatusHalted] = b2f(halted || (skip && o.HaltOnSkip))
	if skip {
		return
	}
	for i := range P {
		g := G[i]
		if o.MaxNorm > 0 {
			g = g * scale
		}
		if o.Kind == cudalib.SGD {
			p := P[i]
			if o.WeightDecay != 0 {
				g = g + float32(o.WeightDecay*p)
			}
			dd := g
			if S0 != nil {
				b := g
				if !v.First {
					b = float32(o.Momentum*S0[i]) + g
				}
				S0[i] = b
				dd = b
				if o.Nesterov {
					dd = g + float32(o.Momentum*b)
				}
			}
			P[i] = p - float32(v.LR*dd)
			continue
		}
		l2 := float32(0)
		if o.Kind == cudalib.Adam {
			l2 = o.WeightDecay
		}
		p := float32(P[i] * v.Decay)
		if l2 != 0 {
			g = g + float32(l2*p)
		}
		m0, v0 := S0[i], S1[i]
		if v.First {
			m0, v0 = 0, 0
		}
		mi := float32(o.Beta1*m0) + float32(o.C1*g)
		vi := float32(o.Beta2*v0) + float32(float32(o.C2*g)*g)
		S0[i], S1[i] = mi, vi
		den := float32(math.Sqrt(float64(vi)))/v.BC2Sqrt + o.Eps
		P[i] = p - float32(v.StepSize*mi)/den
	}
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

func (d *emuDevice) ResetStatus() error {
	if d.capture {
		d.recorded = append(d.recorded, func() { clear(d.f32(d.status, cudalib.StatusWords)) })
		return nil
	}
	clear(d.f32(d.status, cudalib.StatusWords))
	return nil
}

func (d *emuDevice) SetStep(v cudalib.StepValues) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.block = v })
		return nil
	}
	d.block = v
	return nil
}

func (d *emuDevice) CaptureBegin() error {
	if d.capture {
		return errors.New("emulated device: capture already in progress")
	}
	d.capture, d.recorded = true, nil
	return nil
}

func (d *emuDevice) CaptureEnd() (uint64, error) {
	if !d.capture {
		return 0, errors.New("emulated device: no capture in progress")
	}
	d.capture = false
	d.nextID++
	d.graphs[d.nextID] = d.recorded
	d.recorded = nil
	return d.nextID, nil
}

func (d *emuDevice) Capturing() (bool, error) { return d.capture, nil }

func (d *emuDevice) GraphLaunch(exec uint64, v cudalib.StepValues) error {
	ops, ok := d.graphs[exec]
	if !ok {
		return fmt.Errorf("emulated device: no graph %d", exec)
	}
	d.block = v
	for _, op := range ops {
		op()
	}
	return nil
}

func (d *emuDevice) GraphDestroy(exec uint64) error {
	delete(d.graphs, exec)
	return nil
}

// The cuBLASLt plans: their arguments, kept by handle. rejectEpi (tests)
// makes LtPlan fail for an epilogue, as a library without an algorithm for
// it does.
type emuLt struct {
	plans     map[uint64]cudalib.LtArgs
	rejectEpi map[cudalib.Epilogue]bool
	calls     int // LtMatmul calls run
	sideCalls int // of which on the side stream
	forked    bool
}

func (d *emuDevice) LtPlan(a cudalib.LtArgs) (uint64, error) {
	if d.lt.rejectEpi[a.Epilogue] {
		return 0, fmt.Errorf("emulated device: no algorithm for epilogue %d", a.Epilogue)
	}
	if (a.Epilogue == cudalib.EpiBiasReLUAux || a.Epilogue == cudalib.EpiDReLUBGrad) && (a.AuxLD%128 != 0 || a.AuxLD < a.N) {
		return 0, fmt.Errorf("emulated device: mask with %d bits per column for %d rows", a.AuxLD, a.N)
	}
	if d.lt.plans == nil {
		d.lt.plans = map[uint64]cudalib.LtArgs{}
	}
	d.nextID++
	d.lt.plans[d.nextID] = a
	return d.nextID, nil
}

func (d *emuDevice) LtPlanDestroy(plan uint64) error {
	if _, ok := d.lt.plans[plan]; !ok {
		return fmt.Errorf("emulated device: no plan %d", plan)
	}
	delete(d.lt.plans, plan)
	return nil
}

func (d *emuDevice) LtMatmul(plan uint64, a, b, c uintptr, side bool) error {
	p, ok := d.lt.plans[plan]
	if !ok {
		return fmt.Errorf("emulated device: no plan %d", plan)
	}
	if side && !d.lt.forked {
		return fmt.Errorf("emulated device: a GEMM on the side stream without a fork before it")
	}
	if side {
		d.lt.sideCalls++
	}
	if a%uintptr(p.AlignA) != 0 || b%uintptr(p.AlignB) != 0 || c%uintptr(p.AlignC) != 0 {
		return fmt.Errorf("emulated device: operands less aligned than planned")
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.ltMatmul(p, a, b, c) })
		return nil
	}
	d.ltMatmul(p, a, b, c)
	return nil
}

// SideFork and SideJoin: one stream does everything in order here; they
// check that forks and joins pair up, so that the side stream is always
// joined back (a CUDA graph capture would fail otherwise).
func (d *emuDevice) SideFork() error {
	if d.lt.forked {
		return fmt.Errorf("emulated device: side stream forked twice")
	}
	d.lt.forked = true
	return nil
}

func (d *emuDevice) SideJoin() error {
	if !d.lt.forked {
		return fmt.Errorf("emulated device: side stream joined without a fork")
	}
	d.lt.forked = false
	return nil
}

// ltMatmul is the planned GEMM: the product as Gemm computes it, then the
// epilogue in float32, sums in row order as biasActBackward's. The mask
// holds bit (row*AuxLD + col) of C, set where the value before the ReLU was
// above 0.
func (d *emuDevice) ltMatmul(p cudalib.LtArgs, a, b, c uintptr) {
	d.lt.calls++
	d.gemm(p.TransA, p.TransB, p.M, p.N, p.K, 1, a, p.LDA, b, p.LDB, 0, c, p.LDC)
	C := d.f32(c, p.M*p.LDC)
	var mask []uint32
	if p.Aux != 0 {
		mask = d.mem(p.Aux, (p.AuxLD*p.M+31)/32)
	}
	switch p.Epilogue {
	case cudalib.EpiBias, cudalib.EpiBiasReLU, cudalib.EpiBiasReLUAux:
		bias := d.f32(p.Bias, p.N)
		for i := 0; i < p.M; i++ {
			for j := 0; j < p.N; j++ {
				v := C[i*p.LDC+j] + bias[j]
				if p.Epilogue != cudalib.EpiBias {
					if mask != nil {
						bit := i*p.AuxLD + j
						if v > 0 {
							mask[bit/32] |= 1 << (bit % 32)
						} else {
							mask[bit/32] &^= 1 << (bit % 32)
						}
					}
					v = emuRelu(v)
				}
				C[i*p.LDC+j] = v
			}
		}
	case cudalib.EpiDReLUBGrad:
		db := d.f32(p.Bias, p.N)
		for j := 0; j < p.N; j++ {
			var s float32
			for i := 0; i < p.M; i++ {
				bit := i*p.AuxLD + j
				if mask[bit/32]&(1<<(bit%32)) == 0 {
					C[i*p.LDC+j] = 0
				}
				s += C[i*p.LDC+j]
			}
			db[j] = s
		}
	case cudalib.EpiBGradA:
		// Row sums of op(a) (M,K); op(a) is aᵀ when TransA (a stored (K,M)).
		ar, ac := p.M, p.LDA
		if p.TransA {
			ar = p.K
		}
		A, db := d.f32(a, ar*ac), d.f32(p.Bias, p.M)
		for r := 0; r < p.M; r++ {
			var s float32
			for l := 0; l < p.K; l++ {
				if p.TransA {
					s += A[l*p.LDA+r]
				} else {
					s += A[r*p.LDA+l]
				}
			}
			db[r] = s
		}
	}
}
