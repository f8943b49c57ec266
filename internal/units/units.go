// Package units writes quantities the way symddp's messages and tables do.
package units

import "fmt"

// Bytes writes n bytes in the largest of GiB, MiB and KiB that divides it
// ("25 MiB", "64 KiB"), else in bytes ("1000 B").
func Bytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
