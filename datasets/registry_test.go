package datasets

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRegister: a registered loader is found under its name and listed;
// an empty name, a nil loader, a built-in name and a second registration
// panic.
func TestRegister(t *testing.T) {
	load := func(cfg LoadConfig) (Source, Source, error) {
		d, err := NewInMemory([]float32{float32(cfg.Seed), 1}, []int32{0, 1}, []int{1}, 2)
		return d, d, err
	}
	Register("registry-test", load)
	l, ok := Registered("registry-test")
	require.True(t, ok)
	tr, _, err := l(LoadConfig{Seed: 7})
	require.NoError(t, err)
	assert.Equal(t, 2, tr.Len())
	assert.Contains(t, RegisteredNames(), "registry-test")
	_, ok = Registered("no-such-dataset")
	assert.False(t, ok)
	assert.PanicsWithValue(t, `datasets: dataset "registry-test" registered twice`, func() { Register("registry-test", load) })
	assert.PanicsWithValue(t, `datasets: "text" is a built-in dataset`, func() { Register("text", load) })
	assert.Panics(t, func() { Register("", load) })
	assert.Panics(t, func() { Register("nil-loader", nil) })
}
