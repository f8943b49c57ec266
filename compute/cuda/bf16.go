package cuda

import (
	"errors"
	"fmt"
	"math"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/settings"
)

// bf16 on the CUDA engine (compute.BF16Tensors). The layers' bf16 plans
// (Linear, attention, embedding, the classifier loss; Norms on bf16
// tensors) run the library's bf16 kernels (the compute ABI's sdc_* with
// cudalib.BFloat16, or the bf16 forms such as sdc_attention_bf16: methods
// of the engine's device) with fp32 accumulation over bf16 copies of the
// fp32 master weights; weight gradients go in fp32 straight into the
// gradient arena. What the plans share lives here, one per engine: the
// cuBLASLt workspace, the GEMM plans (one per shape, tuned at first use:
// bf16_gemm.go) and the kernels' scratch memory (the plans run one after
// the other on the stream). models.GPT
// made of these plans enqueues, kernel for kernel, what the fused GPT they
// replaced enqueued (the whole model planned as one sequence, until commit
// 7271189), and so gives its bits (ddp's TestBF16GPTBitsEmulated).

var (
	_ compute.BF16Tensors    = (*Engine)(nil)
	_ compute.Embeddings     = (*Engine)(nil)
	_ compute.CrossEntropies = (*Engine)(nil)
)

// bf16State is what the engine's bf16 plans share.
type bf16State struct {
	ws uintptr // the GEMMs' cuBLASLt workspace (bf16Workspace bytes; the handle is the context's)

	gemms map[cudalib.GemmDesc]uintptr // GEMM plans by shape, shared by the layers
	descs map[uintptr]cudalib.GemmDesc // each plan's, for tuning
	order []uintptr                    // the plans, for Close

	tune, tuneLog bool // time the plans' candidates at first use (SYMDDP_CUDA_TUNE)
	tuned         map[uintptr]bool
	tuneC         uintptr // scratch C of the accumulating plans while they are timed
	tuneCBytes    int

	att, ln, emb, bias devScratch // the kernels' scratch, as large as the largest plan needs
}

// devScratch is device memory that kernels borrow during one call.
type devScratch struct {
	ptr   uintptr
	bytes int
}

// bf16Workspace is the cuBLASLt workspace of the bf16 GEMM plans.
const bf16Workspace = 32 << 20

// bf16 returns the state the bf16 plans share, made at the first plan
// (build time): the GEMMs' workspace.
func (e *Engine) bf16() (*bf16State, error) {
	if e.bf != nil {
		return e.bf, nil
	}
	if e.capture.active {
		return nil, errors.New("a bf16 plan made while capturing a CUDA graph")
	}
	ws, err := e.tryAlloc("bf16 GEMM workspace", bf16Workspace)
	if err != nil {
		return nil, err
	}
	e.bf = &bf16State{ws: ws, gemms: map[cudalib.GemmDesc]uintptr{}, descs: map[uintptr]cudalib.GemmDesc{},
		tuned: map[uintptr]bool{}, tune: settings.Get(settings.CUDATune) != "0", tuneLog: settings.Get(settings.CUDATuneLog) == "1"}
	return e.bf, nil
}

// scratch makes s at least bytes long (at least 16), at build time.
func (e *Engine) scratch(s *devScratch, bytes int) error {
	bytes = max(bytes, 16)
	if s.bytes >= bytes {
		return nil
	}
	p, err := e.tryAlloc("bf16 scratch", bytes)
	if err != nil {
		return err
	}
	s.ptr, s.bytes = p, bytes
	return nil
}

// closeBF16 destroys the GEMM plans.
func (e *Engine) closeBF16() {
	if e.bf == nil {
		return
	}
	for _, p := range e.bf.order {
		e.dev.BF16GemmDestroy(uint64(p))
	}
	e.bf = nil
}

// AllocBF16 returns a zeroed bf16 tensor from the engine's device pool.
// Call it at build time only.
func (e *Engine) AllocBF16(shape ...int) compute.Tensor {
	n := checkShape("AllocBF16", shape)
	return &Tensor{e: e, ptr: e.alloc("AllocBF16", 2*n), shape: append([]int(nil), shape...), size: n, dtype: compute.BF16}
}

// masters is a bf16 copy of fp32 master weights: the parameters' span
// [base, base+span) of the arena, copied at wb with every element at half
// its offset. An Update over the whole arena writes the copy with the
// parameters and sets the device word current (sdc_update), and Cast then
// does nothing but clear it (sdc_cast_bf16_unless): the forward's pass over
// the weights (245 us a step at llama-124m on an H100) becomes a 2-byte
// store of each updated parameter. ParamsWritten clears the word, for
// parameters written other than by Update.
type masters struct {
	e          *Engine
	base, span uintptr
	wb         uintptr
	current    *Tensor // one word: 1 when the last Update wrote the copy
	views      []compute.Tensor
}

// BF16Masters returns the bf16 copy of params: one allocation of half the
// bytes of their span in the arena, and one cast kernel over it
// (sdc_cast_bf16). Each parameter must start a multiple of 8 elements into
// the span, so that its copy is 16-byte aligned as the bf16 kernels want.
func (e *Engine) BF16Masters(params []compute.Tensor) (compute.Masters, error) {
	const op = "BF16Masters"
	if len(params) == 0 {
		return nil, errors.New("cuda: BF16Masters of no parameters")
	}
	ts := make([]*Tensor, len(params))
	lo, hi := ^uintptr(0), uintptr(0)
	for i, p := range params {
		ts[i] = e.tensorOf(op, p)
		lo, hi = min(lo, ts[i].ptr), max(hi, ts[i].ptr+uintptr(ts[i].bytes()))
	}
	for i, t := range ts {
		if (t.ptr-lo)%32 != 0 {
			return nil, fmt.Errorf("%w: parameter %d of shape %v is not 8-element aligned in the arena: the bf16 kernels need 16-byte alignment",
				compute.ErrBF16Shape, i, []int(t.shape))
		}
	}
	m := &masters{e: e, base: lo, span: hi - lo}
	var err error
	if m.wb, err = e.tryAlloc(op, int(m.span/2)); err != nil {
		return nil, fmt.Errorf("a bf16 copy of the weights: %w", err)
	}
	m.views = make([]compute.Tensor, len(ts))
	for i, t := range ts {
		m.views[i] = &Tensor{e: e, ptr: m.wb + (t.ptr-lo)/2, shape: append(compute.Shape(nil), t.shape...), size: t.size, dtype: compute.BF16}
	}
	m.current = e.Alloc(1).(*Tensor) // zeroed: the first Cast casts
	e.masters = append(e.masters, m)
	return m, nil
}

// ParamsWritten tells the engine that parameters were written other than
// by Update (a checkpoint loaded, a broadcast from another PE): the next
// Cast of every bf16 copy casts again. ddp calls it after it writes them;
// so must a library user who writes an arena that a bf16 model reads.
func (e *Engine) ParamsWritten() {
	for _, m := range e.masters {
		e.Zero(m.current)
	}
}

// copyFor is the bf16 copy that an Update of the whole arena p writes with
// the parameters: the newest masters whose span lies inside p (a model
// built later over an arena at the same place, as a second trainer's on
// this engine, is the one that trains; an older one left there only casts
// for itself), as the sdc_update arguments (copy of element lo, n
// elements, the current word); zeros when there is none.
func (e *Engine) copyFor(p *Tensor) (copy uintptr, lo, n int, current uintptr) {
	end := p.ptr + uintptr(p.bytes())
	for i := len(e.masters) - 1; i >= 0; i-- {
		if m := e.masters[i]; m.base >= p.ptr && m.base+m.span <= end {
			return m.wb, int((m.base - p.ptr) / 4), int(m.span / 4), m.current.ptr
		}
	}
	return 0, 0, 0, 0
}

// Views are the bf16 copies, in BF16Masters' order.
func (m *masters) Views() []compute.Tensor { return m.views }

// Cast enqueues the rounding of the masters to their copies, which does
// nothing where the last Update wrote them (masters).
func (m *masters) Cast() {
	e := m.e
	e.fail("Masters.Cast", e.dev.CastBF16Unless(m.wb, m.base, int(m.span/4), m.current.ptr))
}

// bf16MaxIndex is the largest element count the bf16 kernels index with
// their 32-bit ints.
const bf16MaxIndex = math.MaxInt32

// bf16Eps is the bf16 layer norm's eps (GPT-2's), fixed in its kernels.
const bf16Eps = 1e-5

// CheckBF16 says whether the engine's bf16 kernels run s (see
// compute.BF16Tensors): Linear layers of widths that are multiples of 8,
// layer norms of such widths with eps 1e-5, causal attention with heads of
// 32 or 64 over a context that is a multiple of 64, the GPT-2 embedding and
// the classifier over a vocabulary that is a multiple of 8; the Linear
// layers' and the classifier's rows and widths each below 2^31 (their
// kernels take rows at 64-bit offsets, so the logits may pass 2^31
// elements), every other tensor below 2^31 elements; a Llama's RMSNorm, SwiGLU and rotary embedding at
// any size (their kernels take 64-bit sizes and need no scratch of the
// engine's).
func (e *Engine) CheckBF16(s compute.OpSpec) error {
	shape := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{compute.ErrBF16Shape}, a...)...)
	}
	tooMany := func(rows, cols int) error {
		return shape("%d rows of %d: too many for the bf16 kernels' 32-bit indices", rows, cols)
	}
	switch s := s.(type) {
	case compute.LinearSpec:
		switch {
		case s.Batch < 1 || s.In < 1 || s.Out < 1:
			return fmt.Errorf("cuda: bf16 Linear of %d rows from %d to %d features", s.Batch, s.In, s.Out)
		case s.In%8 != 0 || s.Out%8 != 0:
			return shape("Linear %s from %d to %d features: the bf16 GEMMs need multiples of 8", s.Name, s.In, s.Out)
		case s.Batch > bf16MaxIndex || max(s.In, s.Out) > bf16MaxIndex:
			// cuBLASLt takes 64-bit sizes, and the bias gradient and GELU
			// kernels index rows with 64-bit offsets
			return tooMany(s.Batch, max(s.In, s.Out))
		case s.Act != compute.Identity:
			return &compute.MissingOpError{Engine: e.Name(), Op: "bf16 Linear with ReLU", Group: "BF16Tensors"}
		case s.GELU && s.Residual:
			return &compute.MissingOpError{Engine: e.Name(), Op: "bf16 Linear with GELU onto a residual stream", Group: "BF16Tensors"}
		}
		return nil
	case compute.NormSpec:
		switch {
		case s.Rows < 1 || s.Cols < 1:
			return fmt.Errorf("cuda: bf16 layer norm of %d rows of %d", s.Rows, s.Cols)
		case s.Cols%8 != 0:
			return shape("width %d: the bf16 kernels need a multiple of 8", s.Cols)
		case s.Cols > 6400:
			return shape("width %d: the bf16 layer norm's backward keeps a row's sums in shared memory, for widths up to 6400", s.Cols)
		case s.Eps != bf16Eps:
			return shape("layer norm eps %g: the bf16 kernels' is %g", s.Eps, bf16Eps)
		case int64(s.Rows)*int64(s.Cols) > bf16MaxIndex:
			return tooMany(s.Rows, s.Cols)
		}
		return nil
	case compute.AttentionSpec:
		switch {
		case s.B < 1 || s.T < 1 || s.C < 1 || s.Heads < 1 || s.C%s.Heads != 0:
			return fmt.Errorf("cuda: causal attention %+v: want B, T, C, Heads >= 1 with C a multiple of Heads", s)
		case s.C/s.Heads != 32 && s.C/s.Heads != 64:
			return shape("width %d over %d heads: the attention kernels need a head size of 32 or 64", s.C, s.Heads)
		case s.T%64 != 0:
			return shape("context %d: the attention kernels need a multiple of 64", s.T)
		case s.B*s.Heads > 65535:
			return shape("%d sequences of %d heads: the attention kernels take at most 65535", s.B, s.Heads)
		case int64(s.B)*int64(s.T)*3*int64(s.C) > bf16MaxIndex:
			return tooMany(s.B*s.T, 3*s.C)
		}
		return nil
	case compute.EmbeddingSpec:
		switch {
		case s.B < 1 || s.T < 1 || s.C < 1 || s.Vocab < 1:
			return fmt.Errorf("cuda: bf16 embedding %+v", s)
		case s.C%8 != 0:
			return shape("width %d: the bf16 kernels need a multiple of 8", s.C)
		case int64(s.B)*int64(s.T)*int64(s.C) > bf16MaxIndex || int64(s.Vocab)*int64(s.C) > bf16MaxIndex:
			return tooMany(max(s.B*s.T, s.Vocab), s.C)
		}
		return nil
	case compute.CrossEntropySpec:
		switch {
		case s.Rows < 1 || s.Classes < 1:
			return fmt.Errorf("cuda: bf16 cross-entropy of %d rows of %d", s.Rows, s.Classes)
		case s.Classes%8 != 0:
			return shape("vocabulary %d: the classifier needs a multiple of 8 (pad it, as gpt2's 50304)", s.Classes)
		case s.Rows > bf16MaxIndex || s.Classes > bf16MaxIndex:
			// a block a row, rows at 64-bit offsets: Llama 3's 128256 over
			// more than 16,743 rows (llama3-1b past 8 sequences of 2048)
			return tooMany(s.Rows, s.Classes)
		}
		return nil
	case compute.GroupedAttentionSpec:
		w := s.Heads * s.HeadSize
		switch {
		case s.Check() != nil:
			return fmt.Errorf("cuda: %w", s.Check())
		case s.HeadSize != 32 && s.HeadSize != 64:
			return shape("head size %d: the attention kernels need 32 or 64", s.HeadSize)
		case s.T%64 != 0:
			return shape("context %d: the attention kernels need a multiple of 64", s.T)
		case s.B*s.Heads > 65535:
			return shape("%d sequences of %d heads: the attention kernels take at most 65535", s.B, s.Heads)
		case int64(s.B)*int64(s.T)*int64(w) > bf16MaxIndex:
			return tooMany(s.B*s.T, w)
		}
		return nil
	case compute.RMSNormSpec:
		if s.Rows < 1 || s.Cols < 1 || !(s.Eps > 0) {
			return fmt.Errorf("cuda: bf16 RMSNorm of %d rows of %d, eps %g", s.Rows, s.Cols, s.Eps)
		}
		return nil
	case compute.SwiGLUSpec:
		if s.Rows < 1 || s.Cols < 1 {
			return fmt.Errorf("cuda: bf16 SwiGLU of %d rows of %d", s.Rows, s.Cols)
		}
		return nil
	case compute.RotarySpec:
		if err := s.Check(); err != nil {
			return fmt.Errorf("cuda: bf16 %w", err)
		}
		return nil
	}
	return &compute.MissingOpError{Engine: e.Name(), Op: "bf16 " + s.OpName(), Group: "BF16Tensors"}
}

// PrepareBF16 checks s as CheckBF16 does and readies the engine to run it
// in bf16: a layer norm's scratch (Norms on bf16 tensors has no plan).
func (e *Engine) PrepareBF16(s compute.OpSpec) error {
	if err := e.CheckBF16(s); err != nil {
		return err
	}
	n, ok := s.(compute.NormSpec)
	if !ok {
		return nil
	}
	bf, err := e.bf16()
	if err != nil {
		return err
	}
	bytes, err := e.dev.LayerNormBackwardScratchBytes(cudalib.BFloat16, n.Rows, n.Cols)
	if err != nil {
		return err
	}
	return e.scratch(&bf.ln, bytes)
}
