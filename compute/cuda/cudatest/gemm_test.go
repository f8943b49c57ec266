package cudatest

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/symddp/symddp/internal/cudalib"
)

// gemmRef: op(A) op(B) of stored row-major A, B (float64, naive).
func gemmRef(a, b []float64, m, n, k int, ta, tb bool) []float64 {
	c := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				av, bv := a[i*k+l], b[l*n+j]
				if ta {
					av = a[l*m+i]
				}
				if tb {
					bv = b[j*k+l]
				}
				s += av * bv
			}
			c[i*n+j] = s
		}
	}
	return c
}

func geluGradTanh(x float64) float64 {
	const h = 1e-6
	return (geluTanh(x+h) - geluTanh(x-h)) / (2 * h)
}

func TestBF16Gemm(t *testing.T) {
	g := newGPU(t)
	const m, n, k = 6, 8, 5
	a, b := g.randBF(m*k, 1, 0), g.randBF(k*n, 1, 0)
	pa, pb := g.bf(a), g.bf(b)
	ws := g.alloc(1024)
	biasV := g.randBF(max(m, n), 0.5, 0)
	auxIn := g.randBF(m*n, 1, 0)
	c0 := g.randBF(m*n, 1, 0)
	for epi := cudalib.BF16EpiNone; epi <= cudalib.BF16EpiBGradA; epi++ {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, ct := range []cudalib.DType{cudalib.BFloat16, cudalib.Float32} {
					if epiHasAux(epi) && ct == cudalib.Float32 {
						continue
					}
					for _, bt := range []cudalib.DType{cudalib.BFloat16, cudalib.Float32} {
						for _, acc := range []bool{false, true} {
							name := gemmName(epi, ta, tb, ct, bt, acc)
							desc := cudalib.GemmDesc{M: m, N: n, K: k, TransA: ta, TransB: tb, Batch: 1, CType: ct,
								BiasType: bt, Epilogue: epi, Accumulate: acc, WorkspaceBytes: 1024}
							plan, err := g.d.BF16GemmCreate(desc)
							g.ok(err)
							// The stored A is (k,m) when ta: the same values reinterpreted.
							pc, pbias, paux := g.alloc(4*m*n), g.alloc(4*max(m, n)), g.bf(auxIn)
							put := func(p uintptr, t cudalib.DType, v []float64) {
								if t == cudalib.BFloat16 {
									g.setBF(p, v)
									return
								}
								f := make([]float32, len(v))
								for i, x := range v {
									f[i] = float32(x)
								}
								g.up(p, unsafe.Pointer(&f[0]), 4*len(f))
							}
							get := func(p uintptr, t cudalib.DType, cnt int) []float64 {
								if t == cudalib.BFloat16 {
									return g.readBF(p, cnt)
								}
								return g.readF32(p, cnt)
							}
							put(pc, ct, c0)
							put(pbias, bt, biasV)
							g.ok(g.d.BF16GemmRun(plan, pc, pa, pb, pbias, paux, ws))
							ref := gemmRef(a, b, m, n, k, ta, tb)
							if acc {
								for i := range ref {
									ref[i] += c0[i]
								}
							}
							var refBias, refAux []float64
							switch epi {
							case cudalib.BF16EpiBias, cudalib.BF16EpiGELUBias, cudalib.BF16EpiGELUAuxBias:
								refAux = make([]float64, m*n)
								for i := range ref {
									refAux[i] = ref[i] + biasV[i%n]
									ref[i] = refAux[i]
									if epi != cudalib.BF16EpiBias {
										ref[i] = geluTanh(ref[i])
									}
								}
							case cudalib.BF16EpiDGELU, cudalib.BF16EpiDGELUBGrad:
								if epi == cudalib.BF16EpiDGELUBGrad {
									refBias = make([]float64, n)
								}
								for i := range ref {
									ref[i] *= geluGradTanh(auxIn[i])
									if refBias != nil {
										refBias[i%n] += ref[i]
									}
								}
							case cudalib.BF16EpiBGradA:
								refBias = make([]float64, m)
								for i := 0; i < m; i++ {
									for l := 0; l < k; l++ {
										if ta {
											refBias[i] += a[l*m+i]
										} else {
											refBias[i] += a[i*k+l]
										}
									}
								}
							}
							rtol := 1e-6
							if ct == cudalib.BFloat16 {
								rtol = bf16Tol
							}
							if epi == cudalib.BF16EpiDGELU || epi == cudalib.BF16EpiDGELUBGrad {
								rtol = max(rtol, 1e-5) // the finite-difference gelu'
							}
							near(t, name+" C", get(pc, ct, m*n), ref, rtol, 1e-8)
							if epi == cudalib.BF16EpiGELUAuxBias {
								near(t, name+" aux", g.readBF(paux, m*n), refAux, bf16Tol, 1e-8)
							} else {
								near(t, name+" aux kept", g.readBF(paux, m*n), auxIn, 0, 0)
							}
							if refBias != nil {
								brtol := 1e-5
								if bt == cudalib.BFloat16 {
									brtol = bf16Tol
								}
								near(t, name+" bias grad", get(pbias, bt, len(refBias)), refBias, brtol, 1e-6)
							} else {
								near(t, name+" bias kept", get(pbias, bt, len(biasV)), biasV, 0, 0)
							}
							g.d.BF16GemmDestroy(plan)
						}
					}
				}
			}
		}
	}
	if lp := g.d.LiveBF16Plans(); lp != 0 {
		t.Errorf("%d plans live after destroying all", lp)
	}
}

func gemmName(epi cudalib.BF16Epilogue, ta, tb bool, ct, bt cudalib.DType, acc bool) string {
	tr := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	ty := func(t cudalib.DType) string {
		if t == cudalib.Float32 {
			return "f32"
		}
		return "bf16"
	}
	s := "epi" + string(rune('0'+epi)) + " " + tr(ta) + tr(tb) + " C " + ty(ct) + " bias " + ty(bt)
	if acc {
		s += " acc"
	}
	return s
}

// TestGPTGemmRunInto: an accumulating plan run into another output reads C
// and leaves it; a plan that does not accumulate is refused.
func TestBF16GemmRunInto(t *testing.T) {
	g := newGPU(t)
	const m, n, k = 4, 8, 3
	a, w, c0, bias := g.randBF(m*k, 1, 0), g.randBF(n*k, 1, 0), g.randBF(m*n, 1, 0), g.randBF(n, 0.5, 0)
	pa, pw, pc, pbias, pd, ws := g.bf(a), g.bf(w), g.bf(c0), g.bf(bias), g.alloc(2*m*n), g.alloc(1024)
	desc := cudalib.GemmDesc{M: m, N: n, K: k, TransB: true, Batch: 1, CType: cudalib.BFloat16,
		BiasType: cudalib.BFloat16, Epilogue: cudalib.BF16EpiBias, Accumulate: true, WorkspaceBytes: 1024}
	plan, err := g.d.BF16GemmCreate(desc)
	g.ok(err)
	g.ok(g.d.BF16GemmRunInto(plan, pd, pc, pa, pw, pbias, 0, ws))
	ref := gemmRef(a, w, m, n, k, false, true)
	for i := range ref {
		ref[i] += bias[i%n] + c0[i]
	}
	near(t, "d = A W^T + bias + c", g.readBF(pd, m*n), ref, bf16Tol, 1e-8)
	near(t, "c kept", g.readBF(pc, m*n), c0, 0, 0)
	desc.Accumulate = false
	plain, err := g.d.BF16GemmCreate(desc)
	g.ok(err)
	wantArg(t, "does not accumulate", g.d.BF16GemmRunInto(plain, pd, pc, pa, pw, pbias, 0, ws))
	g.d.BF16GemmDestroy(plan)
	g.d.BF16GemmDestroy(plain)
}

func TestBF16GemmBatched(t *testing.T) {
	g := newGPU(t)
	const batch, m, n, k = 3, 4, 8, 6
	const sa, sb, sc = m*k + 8, k*n + 16, m*n + 8 // strides with gaps
	a, b := g.randBF(batch*sa, 1, 0), g.randBF(batch*sb, 1, 0)
	pa, pb := g.bf(a), g.bf(b)
	for _, ct := range []cudalib.DType{cudalib.BFloat16, cudalib.Float32} {
		for _, tr := range [][2]bool{{false, false}, {true, true}} {
			desc := cudalib.GemmDesc{M: m, N: n, K: k, TransA: tr[0], TransB: tr[1], Batch: batch, StrideA: sa,
				StrideB: sb, StrideC: sc, CType: ct, BiasType: ct, Accumulate: true}
			plan, err := g.d.BF16GemmCreate(desc)
			g.ok(err)
			c0 := g.randBF(batch*sc, 1, 0)
			pc := g.bf(c0)
			if ct == cudalib.Float32 {
				f := make([]float32, len(c0))
				for i, x := range c0 {
					f[i] = float32(x)
				}
				pc = g.f32(f)
			}
			g.ok(g.d.BF16GemmRun(plan, pc, pa, pb, 0, 0, 0))
			var got []float64
			rtol := 1e-6
			if ct == cudalib.BFloat16 {
				got, rtol = g.readBF(pc, batch*sc), bf16Tol
			} else {
				got = g.readF32(pc, batch*sc)
			}
			ref := append([]float64(nil), c0...)
			for z := 0; z < batch; z++ {
				cz := gemmRef(a[z*sa:z*sa+m*k], b[z*sb:z*sb+k*n], m, n, k, tr[0], tr[1])
				for i, v := range cz {
					ref[z*sc+i] += v
				}
			}
			near(t, "batched "+gemmName(0, tr[0], tr[1], ct, 0, true), got, ref, rtol, 1e-8)
			g.d.BF16GemmDestroy(plan)
		}
	}
}

// TestBF16GemmErrors: what sdc_bf16_gemm_create refuses (an SD_ERR_ARG),
// what a run refuses, a cuBLASLt failure (a plain SD_ERR) for operands less
// aligned than the algorithm wants and for an epilogue without an algorithm.
func TestBF16GemmErrors(t *testing.T) {
	g := newGPU(t)
	const bf = cudalib.BFloat16
	ok := cudalib.GemmDesc{M: 4, N: 8, K: 8, Batch: 1, CType: bf, BiasType: bf, Epilogue: cudalib.BF16EpiGELUAuxBias}
	for name, d := range map[string]cudalib.GemmDesc{
		"m=0":                {M: 0, N: 8, K: 8, Batch: 1, CType: bf, BiasType: bf},
		"batch 0":            {M: 4, N: 8, K: 8, CType: bf, BiasType: bf},
		"batched epilogue":   {M: 4, N: 8, K: 8, Batch: 2, CType: bf, BiasType: bf, Epilogue: cudalib.BF16EpiBias},
		"aux with n=6":       {M: 4, N: 6, K: 8, Batch: 1, CType: bf, BiasType: bf, Epilogue: cudalib.BF16EpiDGELU},
		"aux with fp32 C":    {M: 4, N: 8, K: 8, Batch: 1, Epilogue: cudalib.BF16EpiGELUAuxBias, CType: cudalib.Float32, BiasType: bf},
		"unknown epilogue":   {M: 4, N: 8, K: 8, Batch: 1, CType: bf, BiasType: bf, Epilogue: 9},
		"unknown type":       {M: 4, N: 8, K: 8, Batch: 1, CType: 7, BiasType: bf},
		"no type":            {M: 4, N: 8, K: 8, Batch: 1},
		"negative workspace": {M: 4, N: 8, K: 8, Batch: 1, CType: bf, BiasType: bf, WorkspaceBytes: -1},
	} {
		_, err := g.d.BF16GemmCreate(d)
		wantArg(t, name, err)
	}
	plan, err := g.d.BF16GemmCreate(ok)
	g.ok(err)
	pa, pb, pc, pbias, paux := g.alloc(256), g.alloc(256), g.alloc(256), g.alloc(16), g.alloc(256)
	g.ok(g.d.BF16GemmRun(plan, pc, pa, pb, pbias, paux, 0))
	wantArg(t, "no bias", g.d.BF16GemmRun(plan, pc, pa, pb, 0, paux, 0))
	wantArg(t, "no aux", g.d.BF16GemmRun(plan, pc, pa, pb, pbias, 0, 0))
	wantArg(t, "no C", g.d.BF16GemmRun(plan, 0, pa, pb, pbias, paux, 0))
	var ce *cudalib.Error
	if err := g.d.BF16GemmRun(plan, pc, pa+2, pb, pbias, paux, 0); !errors.As(err, &ce) || ce.Status != 1 {
		t.Errorf("unaligned A: %v, want SD_ERR", err)
	}
	g.ok(g.d.BF16GemmDestroy(plan))
	if n := g.d.LiveBF16Plans(); n != 0 {
		t.Errorf("%d plans live after the last destroy", n)
	}
	wantArg(t, "destroyed plan", g.d.BF16GemmRun(plan, pc, pa, pb, pbias, paux, 0))
	g.d.RejectBF16Epilogue(cudalib.BF16EpiDGELUBGrad)
	_, err = g.d.BF16GemmCreate(cudalib.GemmDesc{M: 4, N: 8, K: 8, Batch: 1, CType: bf, BiasType: bf, Epilogue: cudalib.BF16EpiDGELUBGrad})
	if !errors.As(err, &ce) || ce.Status != 1 || errors.Is(err, cudalib.ErrArgument) {
		t.Errorf("rejected epilogue: %v, want SD_ERR", err)
	}
}
