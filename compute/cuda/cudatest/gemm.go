package cudatest

import "github.com/symddp/symddp/internal/cudalib"

// The bf16 GEMM plans (sdc_bf16_gemm_*): products summed in float64, the
// epilogue on that value, every stored value rounded once.

func epiHasBias(e cudalib.BF16Epilogue) bool {
	return e != cudalib.BF16EpiNone && e != cudalib.BF16EpiDGELU
}

func epiHasAux(e cudalib.BF16Epilogue) bool {
	return e == cudalib.BF16EpiGELUAuxBias || e == cudalib.BF16EpiDGELU || e == cudalib.BF16EpiDGELUBGrad
}

// BF16GemmCreate checks d as sdc_bf16_gemm_create does and returns a
// handle to a copy of it.
func (dev *Device) BF16GemmCreate(d cudalib.GemmDesc) (uint64, error) {
	const call = "sdc_bf16_gemm_create"
	dev.mu.Lock()
	defer dev.mu.Unlock()
	switch {
	case d.M <= 0 || d.N <= 0 || d.K <= 0 || d.Batch < 1 || d.WorkspaceBytes < 0:
		return 0, sdcArgErr(call, "m=%d n=%d k=%d batch=%d workspace %d", d.M, d.N, d.K, d.Batch, d.WorkspaceBytes)
	case d.Epilogue < cudalib.BF16EpiNone || d.Epilogue > cudalib.BF16EpiBGradA:
		return 0, sdcArgErr(call, "unknown epilogue %d", d.Epilogue)
	case (d.CType != cudalib.BFloat16 && d.CType != cudalib.Float32) || (d.BiasType != cudalib.BFloat16 && d.BiasType != cudalib.Float32):
		return 0, sdcArgErr(call, "c_type %d, bias_type %d (want SDC_BF16 or SDC_F32)", d.CType, d.BiasType)
	case d.Batch > 1 && d.Epilogue != cudalib.BF16EpiNone:
		return 0, sdcArgErr(call, "batched GEMMs take no epilogue")
	case d.Batch > 1 && (d.StrideA < 0 || d.StrideB < 0 || d.StrideC < 0):
		return 0, sdcArgErr(call, "negative batch strides %d %d %d", d.StrideA, d.StrideB, d.StrideC)
	case epiHasAux(d.Epilogue) && (d.N%8 != 0 || d.CType != cudalib.BFloat16):
		return 0, sdcArgErr(call, "GELU epilogues want n a multiple of 8 and a bf16 C (n=%d)", d.N)
	case dev.bf16Reject[d.Epilogue]:
		return 0, sdcErr(call, "cuBLASLt has no bf16 algorithm for epilogue %d (RejectBF16Epilogue)", d.Epilogue)
	}
	if dev.bf16Plans == nil {
		dev.bf16Plans = map[uint64]cudalib.GemmDesc{}
	}
	dev.nextID++
	dev.bf16Plans[dev.nextID] = d
	return dev.nextID, nil
}

// BF16GemmDestroy is sdc_bf16_gemm_destroy.
func (dev *Device) BF16GemmDestroy(plan uint64) error {
	dev.mu.Lock()
	defer dev.mu.Unlock()
	delete(dev.bf16Plans, plan)
	return nil
}

// LiveBF16Plans is the number of bf16 GEMM plans created and not destroyed.
func (dev *Device) LiveBF16Plans() int {
	dev.mu.Lock()
	defer dev.mu.Unlock()
	return len(dev.bf16Plans)
}

// RejectBF16Epilogue makes BF16GemmCreate fail (a plain SD_ERR, as a
// cuBLASLt failure) for epi from now on, as a cuBLASLt without an algorithm
// for it does (DGELU_BGRAD, BGRAD_A on some versions).
func (dev *Device) RejectBF16Epilogue(epi cudalib.BF16Epilogue) {
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if dev.bf16Reject == nil {
		dev.bf16Reject = map[cudalib.BF16Epilogue]bool{}
	}
	dev.bf16Reject[epi] = true
}

// BF16GemmTune runs the plan as BF16GemmRun does (reps times after a
// warm-up, once for all candidates): the emulator has one algorithm, which
// it keeps.
func (dev *Device) BF16GemmTune(plan uint64, c, a, b, bias, aux, workspace uintptr, candidates, reps int) error {
	if candidates < 1 || reps < 1 {
		return sdcArgErr("sdc_bf16_gemm_tune", "%d candidates, %d runs", candidates, reps)
	}
	for range reps + 1 {
		if err := dev.BF16GemmRun(plan, c, a, b, bias, aux, workspace); err != nil {
			return err
		}
	}
	return nil
}

// BF16GemmTuned is 0: the emulator times nothing.
func (dev *Device) BF16GemmTuned(plan uint64, best bool) (int, error) { return 0, nil }

// BF16GemmRun checks its arguments as sdc_bf16_gemm_run does, and that a,
// b and c are 16-byte aligned as the plan's algorithm wants (a cuBLASLt
// failure otherwise); the workspace is not used.
func (dev *Device) BF16GemmRun(plan uint64, c, a, b, bias, aux, workspace uintptr) error {
	const call = "sdc_bf16_gemm_run"
	p, err := dev.bf16GemmPlan(call, plan, c, c, a, b, bias, aux)
	if err != nil {
		return err
	}
	if dev.capture {
		dev.recorded = append(dev.recorded, func() { dev.bf16Gemm(p, c, c, a, b, bias, aux) })
		return nil
	}
	dev.bf16Gemm(p, c, c, a, b, bias, aux)
	return nil
}

// BF16GemmRunInto: BF16GemmRun of an accumulating plan with C read from c
// and the result written to d.
func (dev *Device) BF16GemmRunInto(plan uint64, d, c, a, b, bias, aux, workspace uintptr) error {
	const call = "sdc_bf16_gemm_run_into"
	p, err := dev.bf16GemmPlan(call, plan, d, c, a, b, bias, aux)
	if err != nil {
		return err
	}
	if !p.Accumulate {
		return sdcArgErr(call, "the plan does not accumulate, so it reads no C")
	}
	if dev.capture {
		dev.recorded = append(dev.recorded, func() { dev.bf16Gemm(p, d, c, a, b, bias, aux) })
		return nil
	}
	dev.bf16Gemm(p, d, c, a, b, bias, aux)
	return nil
}

// bf16GemmPlan checks the arguments of a plan's run (d is written, c read).
func (dev *Device) bf16GemmPlan(call string, plan uint64, d, c, a, b, bias, aux uintptr) (cudalib.GemmDesc, error) {
	dev.mu.Lock()
	p, ok := dev.bf16Plans[plan]
	dev.mu.Unlock()
	e := p.Epilogue
	switch {
	case !ok:
		return p, sdcArgErr(call, "no plan %#x", plan)
	case d == 0 || c == 0 || a == 0 || b == 0:
		return p, sdcArgErr(call, "NULL argument")
	case epiHasBias(e) && bias == 0:
		return p, sdcArgErr(call, "epilogue %d without a bias vector", e)
	case epiHasAux(e) && aux == 0:
		return p, sdcArgErr(call, "epilogue %d without an aux matrix", e)
	case a%16 != 0 || b%16 != 0 || c%16 != 0 || d%16 != 0:
		return p, sdcErr(call, "cublasLtMatmul: operands less than 16-byte aligned (a %#x b %#x c %#x d %#x)", a, b, c, d)
	}
	return p, nil
}

// gemm: row-major D (m,n) = op(A) op(B) with products summed in float64
// (+ C, read at c, when accumulating; d is c but for sdc_bf16_gemm_run_into), the
// epilogue applied to that float64 value, D and aux rounded once where stored; bias gradients are float64 sums of the
// values before C's rounding (DGELU_BGRAD) or of op(A)'s elements (BGRAD_A),
// rounded to bias_type where written.
func (dev *Device) bf16Gemm(p cudalib.GemmDesc, d, c, a, b, bias, aux uintptr) {
	m, n, k := p.M, p.N, p.K
	opA, opBT, acc := make([]float64, m*k), make([]float64, n*k), make([]float64, m*n)
	cSize := 2
	if p.CType == cudalib.Float32 {
		cSize = 4
	}
	for z := 0; z < p.Batch; z++ {
		A := dev.bf16At(a+uintptr(2*z*p.StrideA), m*k)
		B := dev.bf16At(b+uintptr(2*z*p.StrideB), k*n)
		off := uintptr(cSize * z * p.StrideC)
		cz, dz := c+off, d+off
		for i := 0; i < m; i++ {
			for l := 0; l < k; l++ {
				if p.TransA {
					opA[i*k+l] = bf16ToF64(A[l*m+i])
				} else {
					opA[i*k+l] = bf16ToF64(A[i*k+l])
				}
			}
		}
		for j := 0; j < n; j++ {
			for l := 0; l < k; l++ {
				if p.TransB {
					opBT[j*k+l] = bf16ToF64(B[j*k+l])
				} else {
					opBT[j*k+l] = bf16ToF64(B[l*n+j])
				}
			}
		}
		for i := 0; i < m; i++ {
			ai := opA[i*k : (i+1)*k]
			for j := 0; j < n; j++ {
				bj := opBT[j*k : (j+1)*k]
				var s float64
				for l, av := range ai {
					s += av * bj[l]
				}
				acc[i*n+j] = s
			}
		}
		if p.Accumulate {
			old := dev.loadC(p.CType, cz, m*n)
			for i := range acc {
				acc[i] += old[i]
			}
		}
		dev.bf16Epilogue(p, acc, opA, bias, aux)
		dev.storeC(p.CType, dz, acc)
	}
}

func (d *Device) bf16Epilogue(p cudalib.GemmDesc, acc, opA []float64, bias, aux uintptr) {
	m, n, k := p.M, p.N, p.K
	switch p.Epilogue {
	case cudalib.BF16EpiBias, cudalib.BF16EpiGELUBias, cudalib.BF16EpiGELUAuxBias:
		bv := d.loadC(p.BiasType, bias, n)
		var X []uint16
		if p.Epilogue == cudalib.BF16EpiGELUAuxBias {
			X = d.bf16At(aux, m*n)
		}
		for i := range acc {
			acc[i] += bv[i%n]
			if X != nil {
				X[i] = bf16FromF64(acc[i])
			}
		}
		if p.Epilogue != cudalib.BF16EpiBias {
			gelu32(acc)
		}
	case cudalib.BF16EpiDGELU, cudalib.BF16EpiDGELUBGrad:
		geluGrad32(acc, d.loadBF16(aux, m*n))
		if p.Epilogue == cudalib.BF16EpiDGELUBGrad {
			s := make([]float64, n)
			for i, v := range acc {
				s[i%n] += v
			}
			d.storeC(p.BiasType, bias, s)
		}
	case cudalib.BF16EpiBGradA:
		s := make([]float64, m)
		for i := range s {
			for _, v := range opA[i*k : (i+1)*k] {
				s[i] += v
			}
		}
		d.storeC(p.BiasType, bias, s)
	}
}

// loadC reads n elements of type t at p.
func (d *Device) loadC(t cudalib.DType, p uintptr, n int) []float64 {
	return d.loadInto(t, p, make([]float64, n))
}

// loadInto reads len(dst) elements of type t at p into dst, and returns it.
func (d *Device) loadInto(t cudalib.DType, p uintptr, dst []float64) []float64 {
	if t == cudalib.BFloat16 {
		for i, v := range d.bf16At(p, len(dst)) {
			dst[i] = bf16ToF64(v)
		}
		return dst
	}
	for i, v := range d.f32At(p, len(dst)) {
		dst[i] = float64(v)
	}
	return dst
}

// storeC writes v at p as elements of type t (rounded to nearest even).
func (d *Device) storeC(t cudalib.DType, p uintptr, v []float64) {
	if t == cudalib.BFloat16 {
		h := d.bf16At(p, len(v))
		for i, x := range v {
			h[i] = bf16FromF64(x)
		}
		return
	}
	f := d.f32At(p, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
}
