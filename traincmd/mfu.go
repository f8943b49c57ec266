package traincmd

import (
	"fmt"
	"strings"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
)

// Model FLOPs utilisation (MFU) of a language model's run: the FLOPs the
// model's training needs per token (models.FLOPsCounter) times the
// tokens/s, over the peak FLOP/s of the devices the job runs on. Only the
// model's arithmetic counts, not what an implementation adds
// (recomputation, padding), so runs of different programs compare.

// devicePeak is the dense peak of a GPU in TFLOP/s, from NVIDIA's data
// sheets: tensor-core bf16 without 2:4 sparsity (the sheets' headline
// figure is twice this), and fp32 without TF32 (how the CUDA engine's fp32
// GEMMs run).
type devicePeak struct {
	name       string // a substring of the name CUDA reports for the device
	bf16, fp32 float64
}

// knownPeaks are matched in order against the device's name: the PCIe H100
// before the SXM names; an H100 NVL matches none (no MFU without
// --peak-tflops).
var knownPeaks = []devicePeak{
	{"H200", 989, 67},
	{"H100 PCIe", 756, 51},
	{"H100 SXM", 989, 67},
	{"H100 80GB HBM3", 989, 67}, // what CUDA calls the SXM H100
	{"A100", 312, 19.5},
}

// tablePeak is the dense peak TFLOP/s of the device named device at
// precision p, and whether the device is in the table.
func tablePeak(device string, p compute.Precision) (float64, bool) {
	for _, k := range knownPeaks {
		if strings.Contains(device, k.name) {
			if p == compute.PrecisionBF16 {
				return k.bf16, true
			}
			return k.fp32, true
		}
	}
	return 0, false
}

// mfuInfo is what the reporter needs to print a language model's MFU.
type mfuInfo struct {
	flopsPerToken float64           // models.FLOPsCounter's; 0 for a model that does not say
	precision     compute.Precision // what the model runs in (runPrecision)
	peak          float64           // FLOP/s of all the job's devices; 0: unknown, no MFU
	peakSource    string            // "bf16 dense peak of 1 NVIDIA H200", for the start line
}

// of is the MFU at tokensPerSec, and whether there is one.
func (m mfuInfo) of(tokensPerSec float64) (float64, bool) {
	if m.peak <= 0 || m.flopsPerToken <= 0 || tokensPerSec <= 0 {
		return 0, false
	}
	return tokensPerSec * m.flopsPerToken / m.peak, true
}

// suffix is ", MFU 40.6%" for a line that printed tokensPerSec, or "".
func (m mfuInfo) suffix(tokensPerSec float64) string {
	if v, ok := m.of(tokensPerSec); ok {
		return fmt.Sprintf(", MFU %.1f%%", 100*v)
	}
	return ""
}

// newMFU describes the MFU of model m (built) on engine e: its FLOPs per
// token, the precision it runs in, and the peak of the job's devices
// (devices of them, each named device, "" for the CPU): --peak-tflops per
// device, else the table's peak for a known GPU, else none.
func newMFU(o *options, m models.Model, e compute.Engine, device string, devices int) mfuInfo {
	fc, ok := m.(models.FLOPsCounter)
	if !ok {
		return mfuInfo{}
	}
	info := mfuInfo{precision: runPrecision(o, m, e), flopsPerToken: fc.FLOPsPerToken()}
	devices = max(1, devices)
	per, what := o.peakTFLOPS, "--peak-tflops"
	if per == 0 && device != "" {
		if t, ok := tablePeak(device, info.precision); ok {
			per, what = t, fmt.Sprintf("%s dense peak of %s", info.precision, plural(devices, device))
			if devices == 1 {
				what = fmt.Sprintf("%s dense peak of %s", info.precision, device)
			}
		}
	}
	if per > 0 {
		info.peak = per * 1e12 * float64(devices)
		info.peakSource = what
	}
	return info
}

// runPrecision is the precision model m computes in on engine e: what the
// built model says, when it says (a Precision method); fp32 for a model
// that does not; else --precision, and auto: bf16 on an engine that
// computes in bf16 (compute.BF16Tensors), fp32 elsewhere.
func runPrecision(o *options, m models.Model, e compute.Engine) compute.Precision {
	pm, ok := m.(interface{ Precision() compute.Precision })
	if !ok {
		return compute.PrecisionF32
	}
	if pm.Precision() != compute.PrecisionAuto {
		return pm.Precision()
	}
	if p := o.computePrecision(); p != compute.PrecisionAuto {
		return p
	}
	if _, ok := e.(compute.BF16Tensors); ok {
		return compute.PrecisionBF16
	}
	return compute.PrecisionF32
}
