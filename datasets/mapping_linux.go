package datasets

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/symddp/symddp/internal/regfile"
)

// mapping is a read-only memory mapping of a whole file. Pages of a file
// mapped by several processes are in memory once.
type mapping struct {
	data []byte
	once sync.Once
	err  error
}

// mapFile maps path read-only. Pages come in as they are first read: a PE
// that reads only its shard of a file has only those pages resident.
func mapFile(path string) (*mapping, error) {
	if err := regfile.Check(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := info.Size()
	switch {
	case size == 0:
		return &mapping{}, nil
	case size != int64(int(size)):
		return nil, fmt.Errorf("map %s: %d bytes do not fit in memory", path, size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	return &mapping{data: data}, nil
}

// close unmaps the file; later calls return the first call's result.
func (m *mapping) close() error {
	m.once.Do(func() {
		if m.data != nil {
			m.err = unix.Munmap(m.data)
			m.data = nil
		}
	})
	return m.err
}
