package datasets

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/symddp/symddp/internal/tempfile"
)

// Unpack prepares the IDX files of a named dataset for LoadBytes to map, so
// that every process of a host shares one copy of the pixels. When the four
// files in dir ("" means DefaultDir(name)) are all raw, it writes nothing and
// returns dir. Otherwise it writes the four files, decompressed, into dst
// (created if needed) and returns dst: each file is streamed (no copy of the
// data in memory), checked like ReadIDX checks it (header, exact size, gzip
// CRC) and renamed into place only when complete, so a reader never sees a
// partial file. Errors name the file at fault; missing files give a
// *NotInstalledError as in Load.
func Unpack(name, dir, dst string) (string, error) {
	spec, paths, err := findIDXFiles(name, dir)
	if err != nil {
		return "", err
	}
	var in [4]*bufio.Reader
	raw := true
	for i, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("unpack %s: %w", name, err)
		}
		defer f.Close()
		in[i] = bufio.NewReaderSize(f, 1<<16)
		head, err := in[i].Peek(2)
		if err != nil && err != io.EOF {
			return "", fmt.Errorf("unpack %s: read %s: %w", name, p, err)
		}
		raw = raw && !isGzip(head)
	}
	if raw {
		return filepath.Dir(paths[0]), nil
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", fmt.Errorf("unpack %s: %w", name, err)
	}
	for i, file := range []string{trainImagesFile, trainLabelsFile, testImagesFile, testLabelsFile} {
		if err := unpackIDXFile(in[i], paths[i], filepath.Join(dst, file)); err != nil {
			return "", fmt.Errorf("unpack %s: %w", spec.name, err)
		}
	}
	return dst, nil
}

// unpackIDXFile writes the IDX array read from in, the content of the file
// src, raw or gzip, to dst uncompressed.
func unpackIDXFile(in io.Reader, src, dst string) (err error) {
	r, err := idxStream(in)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	defer r.Close()
	dims, size, err := readIDXHeader(r)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	out, err := tempfile.Create(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(out.Name())
		}
	}()
	w := bufio.NewWriterSize(out, 1<<16)
	if _, err := w.Write(idxHeader(dims)); err != nil {
		return fmt.Errorf("write %s: %w", out.Name(), err)
	}
	rr := &readErr{r: r}
	switch n, err := io.CopyN(w, rr, int64(size)); {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("read %s: %w", src, errIDXTruncated(size, dims, int(n), io.ErrUnexpectedEOF))
	case err != nil && rr.err != nil:
		return fmt.Errorf("read %s: %w", src, errIDXRead(int(n), size, err))
	case err != nil:
		return fmt.Errorf("write %s: %w", out.Name(), err)
	}
	if err := expectIDXEnd(r, size, dims); err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", out.Name(), err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write %s: %w", out.Name(), err)
	}
	if err := os.Rename(out.Name(), dst); err != nil {
		return err
	}
	return nil
}

// idxHeader encodes the magic number and dimensions of an unsigned-byte IDX
// array.
func idxHeader(dims []int) []byte {
	h := make([]byte, 4+4*len(dims))
	h[2], h[3] = idxTypeUbyte, byte(len(dims))
	for i, d := range dims {
		binary.BigEndian.PutUint32(h[4+4*i:], uint32(d))
	}
	return h
}

// readErr remembers the first error of r other than io.EOF, to tell read
// errors from write errors in a copy.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}
