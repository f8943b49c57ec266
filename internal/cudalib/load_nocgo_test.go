//go:build !cgo

package cudalib_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/symddp/symddp/internal/cudalib"
)

func TestLoadWithoutCgo(t *testing.T) {
	_, err := cudalib.Load("")
	if !errors.Is(err, cudalib.ErrUnavailable) || !strings.Contains(err.Error(), "without cgo") {
		t.Fatalf("Load without cgo = %v", err)
	}
}
