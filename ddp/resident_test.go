package ddp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// The training set in device memory (Options.DeviceData) gathers each
// batch on the device with the host gather's bits: runs with it and
// without it end on the same parameters, bit for bit, for float rows and
// for byte rows with their value table; DeviceDataOn says why it cannot.
func TestGPUPathResidentSameBits(t *testing.T) {
	floats, _, err := datasets.SyntheticSplit(600, 100, 20, 4, 7)
	require.NoError(t, err)
	raw := make([]byte, 600*20)
	y := make([]int32, 600)
	for i := range raw {
		raw[i] = byte(i*37 + i/20)
	}
	for i := range y {
		y[i] = int32(i % 4)
	}
	bytes, err := datasets.NewByteSamples(raw, y, []int{20}, 4)
	require.NoError(t, err)
	bytes.Normalize(0.3, 0.2)
	run := func(train datasets.Source, mode DeviceDataMode, graphs bool) ([]float32, string) {
		b := emulatedBackend(graphs)
		defer b.done()
		m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16}, Classes: 4})
		require.NoError(t, err)
		o, err := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
		require.NoError(t, err)
		opts := baseOptions()
		opts.DeviceData = mode
		tr, err := New(b.c, b.e, m, o, opts)
		require.NoError(t, err)
		defer tr.Close()
		require.Equal(t, "device", tr.Strategy())
		_, err = tr.Fit(context.Background(), train, nil)
		require.NoError(t, err)
		return tr.Params(), tr.strat.(*deviceStrategy).residentNote
	}
	for name, src := range map[string]datasets.Source{"floats": floats, "bytes": bytes} {
		t.Run(name, func(t *testing.T) {
			host, note := run(src, DeviceDataOff, true)
			require.Empty(t, note)
			dev, note := run(src, DeviceDataOn, true)
			require.Contains(t, note, "training set in device memory")
			require.Equal(t, host, dev, "resident rows with graphs: the same bits as host gathers")
			eager, _ := run(src, DeviceDataOn, false)
			require.Equal(t, host, eager, "resident rows without graphs")
		})
	}
	// DeviceDataOn with a model that reads tokens: one line, why.
	tok, _ := lmData(t)
	b := emulatedBackend(true)
	defer b.done()
	o, _ := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
	opts := baseOptions()
	opts.DeviceData = DeviceDataOn
	tr, err := New(b.c, b.e, &positionLM{T: lmT, V: lmV}, o, opts)
	require.NoError(t, err)
	defer tr.Close()
	_, err = tr.Fit(context.Background(), tok, nil)
	require.ErrorContains(t, err, "the training set cannot stay in device memory: the model reads tokens or targets per position")
}
