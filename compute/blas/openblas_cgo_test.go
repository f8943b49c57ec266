//go:build cgo

package blas

import (
	"strings"
	"testing"
)

// A missing library is an error that names what was tried.
func TestLoadOpenBLASMissingLibrary(t *testing.T) {
	saved := libraryNames
	defer func() { libraryNames = saved }()
	libraryNames = []string{"libsymddp-no-such-blas.so.0"}
	lib, err := loadOpenBLAS()
	if err == nil || lib != nil || !strings.Contains(err.Error(), "libsymddp-no-such-blas.so.0") {
		t.Errorf("loadOpenBLAS() = %v, %v; want an error naming the library", lib, err)
	}
}
