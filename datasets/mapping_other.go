//go:build !linux

package datasets

import (
	"os"

	"github.com/symddp/symddp/internal/regfile"
)

// mapping holds a whole file. Off Linux it is a copy in Go memory, not a
// memory mapping, so processes do not share it.
type mapping struct {
	data []byte
}

// mapFile reads path into memory.
func mapFile(path string) (*mapping, error) {
	if err := regfile.Check(path); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return &mapping{data: data}, nil
}

// close drops the copy.
func (m *mapping) close() error {
	m.data = nil
	return nil
}
