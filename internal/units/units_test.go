package units

import "testing"

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1000: "1000 B", 1024: "1 KiB", 64 << 10: "64 KiB", 25 << 20: "25 MiB",
		1<<20 + 1024: "1025 KiB", 2 << 30: "2 GiB", 3<<30 + 1: "3221225473 B",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
