// Package cudatest emulates the CUDA engine's device on the host, for tests of
// code that drives compute/cuda (the engine itself, ddp's GPU path, models on
// the GPU) on machines without a GPU, library or cgo.
//
// The device's kernels are the host loops the CPU engine runs
// (internal/hostloops), in the order of float operations the CUDA kernels
// follow, so the emulator keeps no arithmetic of its own except what only
// the GPU does: the GEMM (sums in float64) and the epilogues of cuBLASLt's
// fused GEMMs. computetest's float64
// references stay the independent check of both engines.
package cudatest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/hostloops"
	"github.com/symddp/symddp/optim"
)

// NewEmulated returns an engine whose device is emulated on the host (a
// fresh NewDevice): the engine's own logic (tensors, pool, staging, pipeline,
// capture, optimizer state) runs for real, over host memory, with the
// reference kernels. Streams and events are immediate; a captured "graph" is
// the list of recorded operations, replayed by Launch with the step block's
// new values. GEMM sums in float64, so results agree with the CPU engine to
// float32 rounding, not bit for bit. The engine's bf16 plans run the
// device's emulated bf16 kernels (bf16.go).
func NewEmulated(opts cuda.Options) *cuda.Engine {
	return cuda.NewOnDevice(NewDevice(), opts)
}

// Device is a compute context (cudalib.Device) emulated on the host: device
// addresses are host addresses of its allocations. Use it with
// cuda.NewOnDevice to look at what the engine asked of it (LtCalls,
// SideCalls) or to make it refuse some plans (RejectEpilogue).
type Device struct {
	// an entry point not emulated below fails with cudalib.ErrNotEmulated
	cudalib.UnemulatedDevice

	mu         sync.Mutex
	allocs     []allocation // sorted by base
	status     uintptr
	block      cudalib.StepValues
	capture    bool
	recorded   []func()
	graphs     map[uint64][]func()
	nextID     uint64
	lt         ltState
	scratch    []float32                     // room of the kernels that need some (see buffer)
	sums       []float64                     // a row of the GEMM's sums
	attRoom    []float64                     // the attention's float64 copies (room)
	bf16Plans  map[uint64]cudalib.GemmDesc   // BF16GemmCreate's plans
	bf16Reject map[cudalib.BF16Epilogue]bool // RejectBF16Epilogue's
	limit      int64                         // SetMemoryLimit's bytes (0: none)
	used       int64                         // bytes allocated now
	oneBlock   bool                          // OneBlockClusters was called
}

// SetMemoryLimit makes DevAlloc refuse, wrapping cudalib.ErrNoMemory as the
// library does when cudaMalloc fails, an allocation that would take the
// bytes in use past bytes (0: no limit): a GPU that is full.
func (d *Device) SetMemoryLimit(bytes int64) {
	d.mu.Lock()
	d.limit = bytes
	d.mu.Unlock()
}

// OneBlockClusters records the call (the library limits its bf16 GEMMs'
// thread-block clusters, which the emulation does not have).
func (d *Device) OneBlockClusters() error {
	d.mu.Lock()
	d.oneBlock = true
	d.mu.Unlock()
	return nil
}

// ClustersLimited says whether OneBlockClusters was called.
func (d *Device) ClustersLimited() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.oneBlock
}

// MemoryUsed is the bytes allocated now.
func (d *Device) MemoryUsed() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

var _ cudalib.Device = (*Device)(nil)

// buffer is n floats of the device's scratch room, reused from call to call
// so that a kernel allocates nothing after the first.
func (d *Device) buffer(n int) []float32 {
	if cap(d.scratch) < n {
		d.scratch = make([]float32, n)
	}
	return d.scratch[:n]
}

type allocation struct {
	base  uintptr
	buf   []uint32
	bytes int // as asked of DevAlloc
}

// NewDevice returns an emulated device with nothing allocated but its
// update status words.
func NewDevice() *Device {
	d := &Device{graphs: map[uint64][]func(){}, nextID: 1}
	d.status, _ = d.DevAlloc(4 * cudalib.StatusWords)
	return d
}

// allocation is the allocation that holds device address p.
func (d *Device) allocation(p uintptr) allocation {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := sort.Search(len(d.allocs), func(i int) bool { return d.allocs[i].base > p }) - 1
	if i < 0 {
		panic(fmt.Sprintf("emulated device: address %#x not allocated", p))
	}
	return d.allocs[i]
}

// mem returns n 32-bit words at device address p.
func (d *Device) mem(p uintptr, n int) []uint32 {
	a := d.allocation(p)
	off := int(p-a.base) / 4
	if int(p-a.base)%4 != 0 || off+n > len(a.buf) {
		panic(fmt.Sprintf("emulated device: %d words at %#x outside an allocation of %d words", n, p, len(a.buf)))
	}
	return a.buf[off : off+n]
}

// bytesAt returns n bytes at device address p, which need not be aligned
// (bf16 tensors are 2 bytes an element, so their sizes may be odd multiples
// of 2 bytes); the n bytes must lie inside the DevAlloc size of one allocation.
func (d *Device) bytesAt(p uintptr, n int) []byte {
	if n == 0 {
		return nil
	}
	a := d.allocation(p)
	off := int(p - a.base)
	if n < 0 || off+n > a.bytes {
		panic(fmt.Sprintf("emulated device: %d bytes at %#x outside an allocation of %d bytes", n, p, a.bytes))
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&a.buf[0]), off)), n)
}

func (d *Device) f32(p uintptr, n int) []float32 {
	w := d.mem(p, n)
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&w[0])), n)
}

func (d *Device) i32(p uintptr, n int) []int32 {
	w := d.mem(p, n)
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&w[0])), n)
}

func (d *Device) Info() cudalib.ContextInfo {
	return cudalib.ContextInfo{Stream: 1, CopyStream: 2, Status: d.status, SMCount: 1, OwnsStream: true}
}
func (d *Device) DeviceName() (string, error) { return "emulated GPU", nil }
func (d *Device) Close() error                { return nil }

func (d *Device) DevAlloc(bytes int) (uintptr, error) {
	if d.capture {
		return 0, errors.New("emulated device: allocation while capturing")
	}
	d.mu.Lock()
	if d.limit > 0 && d.used+int64(bytes) > d.limit {
		used := d.used
		d.mu.Unlock()
		return 0, fmt.Errorf("emulated device: %d bytes asked with %d of %d in use: %w", bytes, used, d.limit, cudalib.ErrNoMemory)
	}
	d.used += int64(bytes)
	d.mu.Unlock()
	// 256-byte aligned, as cudaMalloc's: the bf16 kernels want 16.
	words := (bytes+3)/4 + 1
	raw := make([]uint32, words+allocAlign/4)
	skip := (allocAlign - int(uintptr(unsafe.Pointer(&raw[0]))%allocAlign)) % allocAlign / 4
	buf := raw[skip : skip+words : skip+words]
	base := uintptr(unsafe.Pointer(&buf[0]))
	d.mu.Lock()
	d.allocs = append(d.allocs, allocation{base: base, buf: buf, bytes: bytes})
	sort.Slice(d.allocs, func(i, j int) bool { return d.allocs[i].base < d.allocs[j].base })
	d.mu.Unlock()
	return base, nil
}

// allocAlign is the alignment of DevAlloc's addresses.
const allocAlign = 256

func (d *Device) DevFree(p uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, a := range d.allocs {
		if a.base == p {
			d.allocs = append(d.allocs[:i], d.allocs[i+1:]...)
			d.used -= int64(a.bytes)
			return nil
		}
	}
	return fmt.Errorf("emulated device: free of %#x", p)
}

func (d *Device) HostAlloc(bytes int) (unsafe.Pointer, error) {
	buf := make([]uint64, (bytes+7)/8+1)
	return unsafe.Pointer(&buf[0]), nil
}
func (d *Device) HostFree(p unsafe.Pointer) error { return nil }

// Zero, Copy, HtoD and DtoH move every byte asked for (a bf16 tensor of
// odd length is 2 bytes past a whole word).
func (d *Device) Zero(dst uintptr, bytes int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { clear(d.bytesAt(dst, bytes)) })
		return nil
	}
	clear(d.bytesAt(dst, bytes))
	return nil
}

func (d *Device) Copy(dst, src uintptr, bytes int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { copy(d.bytesAt(dst, bytes), d.bytesAt(src, bytes)) })
		return nil
	}
	copy(d.bytesAt(dst, bytes), d.bytesAt(src, bytes))
	return nil
}

func (d *Device) HtoD(onCopy bool, dst uintptr, src unsafe.Pointer, bytes int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.htoD(onCopy, dst, src, bytes) })
		return nil
	}
	d.htoD(onCopy, dst, src, bytes)
	return nil
}

func (d *Device) htoD(onCopy bool, dst uintptr, src unsafe.Pointer, bytes int) {
	if bytes > 0 {
		copy(d.bytesAt(dst, bytes), unsafe.Slice((*byte)(src), bytes))
	}
}

func (d *Device) DtoH(onCopy bool, dst unsafe.Pointer, src uintptr, bytes int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.dtoH(onCopy, dst, src, bytes) })
		return nil
	}
	d.dtoH(onCopy, dst, src, bytes)
	return nil
}

func (d *Device) dtoH(onCopy bool, dst unsafe.Pointer, src uintptr, bytes int) {
	if bytes > 0 {
		copy(unsafe.Slice((*byte)(dst), bytes), d.bytesAt(src, bytes))
	}
}

// StoreHost is the device writing into host memory: src's bytes then
// src2's, DtoH on the stream, with the C entry point's checks.
func (d *Device) StoreHost(dst unsafe.Pointer, src uintptr, bytes int, src2 uintptr, bytes2 int) error {
	if bytes == 0 && bytes2 == 0 {
		return nil
	}
	if dst == nil || (bytes > 0 && src == 0) || (bytes2 > 0 && src2 == 0) || bytes%4 != 0 || bytes2%4 != 0 ||
		uintptr(dst)%4 != 0 || src%4 != 0 || src2%4 != 0 {
		return fmt.Errorf("emulated device: StoreHost of %d and %d bytes at %p from %#x and %#x: want whole aligned words", bytes, bytes2, dst, src, src2)
	}
	if err := d.DtoH(false, dst, src, bytes); err != nil {
		return err
	}
	return d.DtoH(false, unsafe.Add(dst, bytes), src2, bytes2)
}

func (d *Device) EventCreate() (uint64, error) {
	d.nextID++
	return d.nextID, nil
}
func (d *Device) EventDestroy(ev uint64) error                     { return nil }
func (d *Device) EventRecord(onCopy bool, ev uint64) error         { return nil }
func (d *Device) WaitEvent(onCopy bool, ev uint64) error           { return nil }
func (d *Device) EventSync(ev uint64, timeout time.Duration) error { return nil }
func (d *Device) Sync(timeout time.Duration) error {
	if d.capture {
		return errors.New("emulated device: sync while capturing")
	}
	return nil
}

// Gemm: row-major c (m,n) = alpha op(a) op(b) + beta c, sums in float64.
func (d *Device) Gemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) })
		return nil
	}
	d.gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	return nil
}

// GemmBatched: Gemm over batch products at fixed strides (elements).
func (d *Device) GemmBatched(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda, strideA int, b uintptr, ldb, strideB int, beta float32, c uintptr, ldc, strideC, batch int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() {
			d.gemmBatched(transA, transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c, ldc, strideC, batch)
		})
		return nil
	}
	d.gemmBatched(transA, transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c, ldc, strideC, batch)
	return nil
}

func (d *Device) gemmBatched(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda, strideA int, b uintptr, ldb, strideB int, beta float32, c uintptr, ldc, strideC, batch int) {
	for i := 0; i < batch; i++ {
		d.gemm(transA, transB, m, n, k, alpha, a+uintptr(4*i*strideA), lda, b+uintptr(4*i*strideB), ldb, beta, c+uintptr(4*i*strideC), ldc)
	}
}

// extent is how many elements from its first a matrix of rows rows of cols
// spans with rows ld elements apart (a head's slice of a wider tensor ends
// before the row length does).
func extent(rows, cols, ld int) int {
	if rows == 0 || cols == 0 {
		return 0
	}
	return (rows-1)*ld + cols
}

func (d *Device) gemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) {
	// op(a)[i][l] = A[i*ai+l*al], op(b)[l][j] = B[l*bl+j*bj]
	ar, ac, ai, al := m, k, lda, 1
	if transA {
		ar, ac, ai, al = k, m, 1, lda
	}
	br, bc, bl, bj := k, n, ldb, 1
	if transB {
		br, bc, bl, bj = n, k, 1, ldb
	}
	A, B, C := d.f32(a, extent(ar, ac, lda)), d.f32(b, extent(br, bc, ldb)), d.f32(c, extent(m, n, ldc))
	// Every sum runs over l in order from 0 (the float64 products are
	// exact): a row of sums at a time along op(b)'s rows when they are
	// contiguous, one dot product at a time otherwise.
	if cap(d.sums) < n {
		d.sums = make([]float64, n)
	}
	s := d.sums[:n]
	for i := 0; i < m; i++ {
		if !transB {
			clear(s)
			for l := 0; l < k; l++ {
				x := float64(A[i*ai+l*al])
				for j, y := range B[l*ldb : l*ldb+n] {
					s[j] += x * float64(y)
				}
			}
		} else {
			for j := range s {
				var sum float64
				for l, x, y := 0, i*ai, j*bj; l < k; l, x, y = l+1, x+al, y+bl {
					sum += float64(A[x]) * float64(B[y])
				}
				s[j] = sum
			}
		}
		for j, sum := range s {
			v := float32(float64(alpha) * sum)
			if beta != 0 {
				v += beta * C[i*ldc+j]
			}
			C[i*ldc+j] = v
		}
	}
}

func (d *Device) BiasAct(y uintptr, rows, cols int, bias uintptr, act cudalib.Activation) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.biasAct(y, rows, cols, bias, act) })
		return nil
	}
	d.biasAct(y, rows, cols, bias, act)
	return nil
}

// biasAct is the CPU engine's loop (hostloops.BiasAct): y + bias, then Go's
// max(·, 0) for ReLU, as sdc_bias_act.
func (d *Device) biasAct(y uintptr, rows, cols int, bias uintptr, act cudalib.Activation) {
	var bs []float32
	if bias != 0 {
		bs = d.f32(bias, cols)
	}
	hostloops.BiasAct(d.f32(y, rows*cols), bs, rows, cols, act == cudalib.ReLU)
}

// BiasActBackward is sdc_bias_act_backward. Float32: see biasActBackward.
// BFloat16: dbias = the float64 column sums of dy, rounded to float32 (the
// kernel's chunked float32 sums are not emulated bit for bit); its
// arguments checked as the library checks them.
func (d *Device) BiasActBackward(dtype cudalib.DType, dy, y uintptr, rows, cols int, dbias uintptr, act cudalib.Activation, accumulate bool, scratch uintptr) error {
	if dtype == cudalib.BFloat16 {
		return d.biasBackwardBF16(dy, rows, cols, dbias, act, accumulate, scratch)
	}
	if dtype != cudalib.Float32 {
		return sdcArgErr("sdc_bias_act_backward", "dtype %d", dtype)
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.biasActBackward(dy, y, rows, cols, dbias, act, accumulate) })
		return nil
	}
	d.biasActBackward(dy, y, rows, cols, dbias, act, accumulate)
	return nil
}

// biasActBackward masks dy where the ReLU's output is <= 0 (hostloops.ReLUMask)
// and sums the columns of dy from 0 in row order (hostloops.ColSums); with
// accumulate the sums are added to dbias after, as sdc_bias_act_backward
// does.
func (d *Device) biasActBackward(dy, y uintptr, rows, cols int, dbias uintptr, act cudalib.Activation, accumulate bool) {
	DY := d.f32(dy, rows*cols)
	if act == cudalib.ReLU {
		hostloops.ReLUMask(DY, d.f32(y, rows*cols))
	}
	if dbias == 0 {
		return
	}
	db := d.f32(dbias, cols)
	if !accumulate {
		clear(db)
		hostloops.ColSums(db, DY, rows, cols)
		return
	}
	sums := d.buffer(cols)
	clear(sums)
	hostloops.ColSums(sums, DY, rows, cols)
	hostloops.Acc1(sums, db) // (column sum) + dbias
	copy(db, sums)
}

// SoftmaxXent is sdc_softmax_xent. Float32: see softmaxXent. BFloat16: see
// softmaxXentBF16 (loss.go).
func (d *Device) SoftmaxXent(dtype cudalib.DType, logits, labels uintptr, rows, classes, ld int, dlogits uintptr, scale float32, useBlock bool, stats, losses uintptr) error {
	if dtype == cudalib.BFloat16 {
		return d.softmaxXentBF16(logits, labels, rows, classes, ld, dlogits, scale, useBlock, stats, losses)
	}
	if dtype != cudalib.Float32 || ld != classes {
		return sdcArgErr("sdc_softmax_xent", "dtype %d, %d classes in rows of %d", dtype, classes, ld)
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.softmaxXent(logits, labels, rows, classes, dlogits, scale, useBlock, stats) })
		return nil
	}
	d.softmaxXent(logits, labels, rows, classes, dlogits, scale, useBlock, stats)
	return nil
}

func (d *Device) softmaxXent(logits, labels uintptr, rows, classes int, dlogits uintptr, scale float32, useBlock bool, stats uintptr) {
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
		l, hit := hostloops.SoftmaxXentRow(x, g, y, scale)
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

func (d *Device) Accumulate(dst, src uintptr, n int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.accumulate(dst, src, n) })
		return nil
	}
	d.accumulate(dst, src, n)
	return nil
}

func (d *Device) accumulate(dst, src uintptr, n int) {
	hostloops.Acc1(d.f32(dst, n), d.f32(src, n))
}

func (d *Device) Scale(x uintptr, s float32, n int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.scale(x, s, n) })
		return nil
	}
	d.scale(x, s, n)
	return nil
}

func (d *Device) scale(x uintptr, s float32, n int) {
	hostloops.Scale(d.f32(x, n), s)
}

func (d *Device) SumSquares(x uintptr, n int, timeout time.Duration) (float64, error) {
	if d.capture {
		return 0, errors.New("emulated device: SumSquares while capturing")
	}
	return hostloops.SumSquares(d.f32(x, n)), nil
}

// SumSquaresEnqueue follows sdc_sum_squares_enqueue: the sum as
// optim.SumSquares adds it (Update's gradient check, so that emulated
// shards combine exactly as ddp's host sharded update combines them),
// stored as a float64 at out.
func (d *Device) SumSquaresEnqueue(x uintptr, n int, out uintptr) error {
	if out%8 != 0 || n < 0 {
		return fmt.Errorf("emulated sdc_sum_squares_enqueue: %d elements into %#x", n, out)
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.sumSquaresEnqueue(x, n, out) })
		return nil
	}
	d.sumSquaresEnqueue(x, n, out)
	return nil
}

func (d *Device) sumSquaresEnqueue(x uintptr, n int, out uintptr) {
	var sum float64
	if n > 0 {
		sum = optim.SumSquares(d.f32(x, n))
	}
	binary.LittleEndian.PutUint64(d.bytesAt(out, 8), math.Float64bits(sum))
}

// Update follows sdc_update: the gradient check (the sum of squares as
// optim.SumSquares adds it, or the sum from 0 of the nparts partial sums at
// partials, partStride bytes apart; the clip factor of optim.ClipFactor),
// then the CPU engine's update loops (hostloops.SGD, hostloops.SGDMomentum, hostloops.Adam),
// whose order of float32 operations the kernels follow; with a bf16 copy,
// the word at copyFlag set to 1 and the updated elements [copyLo,
// copyLo+copyN) rounded into the copy.
func (d *Device) Update(o cudalib.OptimArgs, v cudalib.StepValues, useBlock bool, params, grads, state0, state1, exempt uintptr, n int, partials uintptr, nparts, partStride int, cp uintptr, copyLo, copyN int, copyFlag uintptr) error {
	if partials != 0 && (nparts < 1 || partials%8 != 0 || partStride%8 != 0 || (nparts > 1 && partStride < 8)) ||
		partials == 0 && (nparts != 0 || partStride != 0) {
		return fmt.Errorf("emulated sdc_update: %d partial sums at %#x, %d bytes apart", nparts, partials, partStride)
	}
	if cp != 0 && (cp%2 != 0 || copyLo < 0 || copyN < 1 || copyLo > n-copyN || partials != 0 || copyFlag%4 != 0) ||
		cp == 0 && (copyLo != 0 || copyN != 0 || copyFlag != 0) {
		return sdcArgErr("sdc_update", "a bf16 copy at %#x of elements [%d, +%d) of %d, flag %#x", cp, copyLo, copyN, n, copyFlag)
	}
	run := func() {
		if copyFlag != 0 {
			binary.LittleEndian.PutUint32(d.bytesAt(copyFlag, 4), 1)
		}
		if d.update(o, v, useBlock, params, grads, state0, state1, exempt, n, partials, nparts, partStride) && cp != 0 {
			d.castBF16(cp, params+uintptr(4*copyLo), copyN)
		}
	}
	if d.capture {
		d.recorded = append(d.recorded, run)
		return nil
	}
	run()
	return nil
}

// update runs sdc_update's two kernels; it says whether the parameters
// were updated (not skipped, not empty).
func (d *Device) update(o cudalib.OptimArgs, v cudalib.StepValues, useBlock bool, params, grads, state0, state1, exempt uintptr, n int, partials uintptr, nparts, partStride int) bool {
	if n == 0 && partials == 0 {
		return false
	}
	if useBlock {
		v = d.block
	}
	var sum float64
	if partials == 0 {
		sum = optim.SumSquares(d.f32(grads, n))
	} else {
		for k := range nparts {
			sum += math.Float64frombits(binary.LittleEndian.Uint64(d.bytesAt(partials+uintptr(k*partStride), 8)))
		}
	}
	skip, scale := d.verdict(o, sum)
	if skip || n == 0 {
		return false
	}
	P, G := d.f32(params, n), d.f32(grads, n)
	var S0, S1 []float32
	if state0 != 0 {
		S0 = d.f32(state0, n)
	}
	if state1 != 0 {
		S1 = d.f32(state1, n)
	}
	if o.MaxNorm > 0 {
		// The kernels scale each gradient as they read it; grads stay.
		scaled := d.buffer(n)
		copy(scaled, G)
		hostloops.Scale(scaled, scale)
		G = scaled
	}
	if v.First && o.Kind != cudalib.SGD {
		clear(S0)
		clear(S1)
	}
	if exempt == 0 {
		d.updateRun(o, v, P, G, S0, S1, false)
		return true
	}
	// runs of elements with the same exemption, each as the optimizer
	// with (or without) weight decay; a shard's mask need not be aligned
	mask := d.bytesAt(exempt, n)
	sub := func(x []float32, i, j int) []float32 {
		if x == nil {
			return nil
		}
		return x[i:j]
	}
	for i := 0; i < n; {
		j := i + 1
		for j < n && (mask[j] != 0) == (mask[i] != 0) {
			j++
		}
		d.updateRun(o, v, P[i:j], G[i:j], sub(S0, i, j), sub(S1, i, j), mask[i] != 0)
		i = j
	}
	return true
}

// verdict is sdc_verdict: the status words from the global sum of squares
// (skip when it is not finite or a halt is latched; the clip factor; the
// norm). It returns whether the update is skipped and the clip factor.
func (d *Device) verdict(o cudalib.OptimArgs, sum float64) (skip bool, scale float32) {
	st := d.f32(d.status, cudalib.StatusWords)
	norm := math.Sqrt(sum)
	halted := st[cudalib.StatusHalted] != 0
	skip = halted || math.IsNaN(sum) || math.IsInf(sum, 0)
	scale = 1
	if o.MaxNorm > 0 {
		scale, _ = optim.ClipFactor(norm, o.MaxNorm)
	}
	st[cudalib.StatusSkipped], st[cudalib.StatusScale], st[cudalib.StatusNorm] = b2f(skip), scale, float32(norm)
	st[cudalib.StatusHalted] = b2f(halted || (skip && o.HaltOnSkip))
	return skip, scale
}

// updateRun is one run of the update: exempt drops the weight decay.
func (d *Device) updateRun(o cudalib.OptimArgs, v cudalib.StepValues, P, G, S0, S1 []float32, exempt bool) {
	wd, decay := o.WeightDecay, v.Decay
	if exempt {
		wd, decay = 0, 1
	}
	switch {
	case o.Kind == cudalib.SGD && S0 == nil:
		hostloops.SGD(P, G, v.LR, wd)
	case o.Kind == cudalib.SGD:
		hostloops.SGDMomentum(P, G, S0, v.LR, wd, o.Momentum, o.Nesterov, v.First)
	default:
		a := hostloops.AdamArgs{Decay: decay, Beta1: o.Beta1, Beta2: o.Beta2, C1: o.C1, C2: o.C2,
			Eps: o.Eps, StepSize: v.StepSize, BC2Sqrt: v.BC2Sqrt}
		if o.Kind == cudalib.Adam {
			a.L2 = wd
		}
		hostloops.Adam(P, G, S0, S1, &a)
	}
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

func (d *Device) ResetStatus() error {
	if d.capture {
		d.recorded = append(d.recorded, func() { clear(d.f32(d.status, cudalib.StatusWords)) })
		return nil
	}
	clear(d.f32(d.status, cudalib.StatusWords))
	return nil
}

func (d *Device) SetStep(v cudalib.StepValues) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.block = v })
		return nil
	}
	d.block = v
	return nil
}

func (d *Device) CaptureBegin() error {
	if d.capture {
		return errors.New("emulated device: capture already in progress")
	}
	d.capture, d.recorded = true, nil
	return nil
}

func (d *Device) CaptureEnd() (uint64, error) {
	if !d.capture {
		return 0, errors.New("emulated device: no capture in progress")
	}
	d.capture = false
	d.nextID++
	d.graphs[d.nextID] = d.recorded
	d.recorded = nil
	return d.nextID, nil
}

func (d *Device) Capturing() (bool, error) { return d.capture, nil }

// Enqueue runs op now or, while a capture is in progress, records it to run
// at each launch of the graph, in order with the device's own work: how an
// emulated comm backend of a test (ddp's world of several PEs) puts its
// collectives on the engine's "stream", so that a step holding them can be
// recorded and replayed.
func (d *Device) Enqueue(op func()) {
	if d.capture {
		d.recorded = append(d.recorded, op)
		return
	}
	op()
}

func (d *Device) GraphLaunch(exec uint64, v cudalib.StepValues) error {
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

func (d *Device) GraphDestroy(exec uint64) error {
	delete(d.graphs, exec)
	return nil
}

// The cuBLASLt plans: their arguments, kept by handle. rejectEpi (tests)
// makes LtPlan fail for an epilogue, as a library without an algorithm for
// it does.
type ltState struct {
	plans     map[uint64]cudalib.LtArgs
	rejectEpi map[cudalib.Epilogue]bool
	calls     int // LtMatmul calls run
	sideCalls int // of which on the side stream
	forked    bool
}

// RejectEpilogue makes LtPlan fail for epi from now on, as a library whose
// cuBLASLt has no algorithm for it does.
func (d *Device) RejectEpilogue(epi cudalib.Epilogue) {
	if d.lt.rejectEpi == nil {
		d.lt.rejectEpi = map[cudalib.Epilogue]bool{}
	}
	d.lt.rejectEpi[epi] = true
}

// LtCalls is the number of planned GEMMs (LtMatmul) run so far.
func (d *Device) LtCalls() int { return d.lt.calls }

// SideCalls is the number of those enqueued on the side stream.
func (d *Device) SideCalls() int { return d.lt.sideCalls }

func (d *Device) LtPlan(a cudalib.LtArgs) (uint64, error) {
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

func (d *Device) LtPlanDestroy(plan uint64) error {
	if _, ok := d.lt.plans[plan]; !ok {
		return fmt.Errorf("emulated device: no plan %d", plan)
	}
	delete(d.lt.plans, plan)
	return nil
}

func (d *Device) LtMatmul(plan uint64, a, b, c uintptr, side bool) error {
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
func (d *Device) SideFork() error {
	if d.lt.forked {
		return fmt.Errorf("emulated device: side stream forked twice")
	}
	d.lt.forked = true
	return nil
}

func (d *Device) SideJoin() error {
	if !d.lt.forked {
		return fmt.Errorf("emulated device: side stream joined without a fork")
	}
	d.lt.forked = false
	return nil
}

// ltMatmul is the planned GEMM: the product as Gemm computes it, then the
// epilogue in float32 with the CPU engine's loops where they apply (bias and
// ReLU, column sums in row order as biasActBackward's). The mask
// holds bit (row*AuxLD + col) of C, set where the value before the ReLU was
// above 0.
func (d *Device) ltMatmul(p cudalib.LtArgs, a, b, c uintptr) {
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
		relu := p.Epilogue != cudalib.EpiBias
		for i := 0; i < p.M; i++ {
			row := C[i*p.LDC : i*p.LDC+p.N]
			hostloops.BiasAct(row, bias, 1, p.N, relu)
			if mask == nil || !relu {
				continue
			}
			// After the ReLU, v > 0 exactly where the value before it was.
			for j, v := range row {
				bit := i*p.AuxLD + j
				if v > 0 {
					mask[bit/32] |= 1 << (bit % 32)
				} else {
					mask[bit/32] &^= 1 << (bit % 32)
				}
			}
		}
	case cudalib.EpiDReLUBGrad:
		for i := 0; i < p.M; i++ {
			for j := 0; j < p.N; j++ {
				bit := i*p.AuxLD + j
				if mask[bit/32]&(1<<(bit%32)) == 0 {
					C[i*p.LDC+j] = 0
				}
			}
		}
		db := d.f32(p.Bias, p.N)
		clear(db)
		if p.LDC == p.N {
			hostloops.ColSums(db, C, p.M, p.N)
			break
		}
		for i := 0; i < p.M; i++ {
			hostloops.ColSums(db, C[i*p.LDC:i*p.LDC+p.N], 1, p.N)
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

// GatherRows emulates sdc_gather_rows: dst row r = src row idx[r] (fp32,
// or bytes through table), zeros for idx -1.
func (d *Device) GatherRows(dst, src, table, idx uintptr, rows, cols int) error {
	if rows < 0 || cols < 0 {
		return fmt.Errorf("emulated sdc_gather_rows: %d rows of %d", rows, cols)
	}
	run := func() {
		if rows == 0 || cols == 0 {
			return
		}
		out, ix := d.f32(dst, rows*cols), d.i32(idx, rows)
		var tab []float32
		if table != 0 {
			tab = d.f32(table, 256)
		}
		for r, i := range ix {
			o := out[r*cols : (r+1)*cols]
			switch {
			case i < 0:
				clear(o)
			case tab != nil:
				for j, b := range d.bytesAt(src+uintptr(int(i)*cols), cols) {
					o[j] = tab[b]
				}
			default:
				copy(o, d.f32(src+uintptr(4*int(i)*cols), cols))
			}
		}
	}
	if d.capture {
		d.recorded = append(d.recorded, run)
		return nil
	}
	run()
	return nil
}

// sdErrArg is SD_ERR_ARG, the compute ABI's status of a bad argument.
const sdErrArg = 5

// sdcArgErr is the error of an sdc_* entry point that refuses its
// arguments, as the library reports it (an SD_ERR_ARG *cudalib.Error).
func sdcArgErr(call, format string, a ...any) error {
	return &cudalib.Error{Call: call, Status: sdErrArg, Msg: "emulated: " + fmt.Sprintf(format, a...)}
}

// sdcErr is the error of an sdc_* entry point whose CUDA or cuBLASLt call
// fails, as the library reports it (an SD_ERR *cudalib.Error).
func sdcErr(call, format string, a ...any) error {
	return &cudalib.Error{Call: call, Status: 1, Msg: "emulated: " + fmt.Sprintf(format, a...)}
}
