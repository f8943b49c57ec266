package launch

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestGPUCount(t *testing.T) {
	driver := t.TempDir() // three GPUs
	for _, g := range []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"} {
		if err := os.Mkdir(filepath.Join(driver, g), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	none := filepath.Join(driver, "missing")
	lib := func(n int, err error) func() (int, error) { return func() (int, error) { return n, err } }
	libErr := errors.New("no CUDA driver")
	for _, c := range []struct {
		name   string
		env    map[string]string
		driver string
		lib    func() (int, error)
		want   int
		err    string
	}{
		{"visible list", map[string]string{"CUDA_VISIBLE_DEVICES": "0,1"}, driver, lib(8, nil), 2, ""},
		{"visible one", map[string]string{"CUDA_VISIBLE_DEVICES": "3"}, driver, nil, 1, ""},
		{"visible UUIDs, blanks", map[string]string{"CUDA_VISIBLE_DEVICES": " GPU-8f2a, ,GPU-11c0,"}, none, nil, 2, ""},
		{"visible empty", map[string]string{"CUDA_VISIBLE_DEVICES": ""}, driver, lib(8, nil), 0, "CUDA_VISIBLE_DEVICES is empty: no GPU to run on"},
		{"visible blank", map[string]string{"CUDA_VISIBLE_DEVICES": " , "}, driver, lib(8, nil), 0, "CUDA_VISIBLE_DEVICES is empty: no GPU to run on"},
		{"driver", nil, driver, lib(8, nil), 3, ""},
		{"library", nil, none, lib(4, nil), 4, ""},
		{"library error", nil, none, lib(0, libErr), 0, libErr.Error()},
		{"library none", nil, none, lib(0, nil), 0, "no GPU found"},
		{"no library", nil, none, nil, 0, "no GPU found"},
	} {
		n, err := gpuCountFrom(lookupIn(c.env), c.driver, c.lib)
		if n != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("%s: got %d, %v; want %d, error %q", c.name, n, err, c.want, c.err)
		}
	}
}
