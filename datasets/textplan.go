package datasets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// textPart is a byte range of a text file that goes, as one document or
// the rest of one, into one split of a tokenized corpus.
type textPart struct {
	path         string
	offset, size int64 // the bytes [offset, offset+size) of the file
	val          bool
	// cont says the part continues the previous part's document (the
	// fallback split cut the file there): no EOT goes before it.
	cont bool
}

// planText decides, from the listing and the first bytes of each file,
// which bytes of which files a tokenized corpus holds and where each goes:
// the split of LoadText and BuildCorpus (every opts.ValEvery-th text file is
// validation data; with fewer text files, the last 1/ValEvery of the bytes),
// with the same cap, binary test and skipped empty files. It does not read
// the files whole: the sizes are the listing's. opts has its defaults.
func planText(root string, files []textFile, opts TextOptions) ([]textPart, CorpusInfo, error) {
	info := CorpusInfo{Source: root, Fingerprint: fingerprint(root, files, opts), MaxBytes: opts.MaxBytes, ValEvery: opts.ValEvery}
	head := make([]byte, binaryProbe)
	left := opts.MaxBytes
	if left == 0 {
		left = 1<<63 - 1
	}
	var parts []textPart
	for _, file := range files {
		if left == 0 {
			break
		}
		if file.size == 0 {
			continue
		}
		isText, err := startsAsText(file.path, head)
		if err != nil {
			return nil, info, err
		}
		if !isText {
			info.Binary++
			continue
		}
		p := textPart{path: file.path, size: min(file.size, left), val: info.Files%opts.ValEvery == opts.ValEvery-1}
		if p.val {
			info.ValFiles++
			info.ValBytes += p.size
		} else {
			info.TrainFiles++
			info.TrainBytes += p.size
		}
		parts = append(parts, p)
		info.Files++
		left -= p.size
	}
	switch {
	case info.Files == 0:
		return nil, info, noText(root, info.Binary)
	case info.ValFiles > 0:
		info.Split = fmt.Sprintf("one text file in %d (files %d, %d, ... counting from 0, in file order)",
			opts.ValEvery, opts.ValEvery-1, 2*opts.ValEvery-1)
	default:
		total := info.TrainBytes
		info.ValBytes = total / int64(opts.ValEvery)
		info.TrainBytes = total - info.ValBytes
		info.TrainFiles = 0
		info.Split = fmt.Sprintf("the last 1/%d of the bytes (fewer than %d text files)", opts.ValEvery, opts.ValEvery)
		parts = cutTail(parts, info.TrainBytes)
	}
	return parts, info, nil
}

// cutTail marks the parts after the first train bytes as validation data,
// cutting the part the boundary falls in into two.
func cutTail(parts []textPart, train int64) []textPart {
	out := make([]textPart, 0, len(parts)+1)
	for _, p := range parts {
		switch {
		case train >= p.size:
			train -= p.size
			out = append(out, p)
		case train > 0:
			head, tail := p, p
			head.size = train
			tail.offset, tail.size, tail.val, tail.cont = p.offset+train, p.size-train, true, true
			out = append(out, head, tail)
			train = 0
		default:
			p.val = true
			out = append(out, p)
		}
	}
	return out
}

// startsAsText reports whether the file at path has no NUL byte among its
// first len(head) bytes.
func startsAsText(path string, head []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("text corpus: %w", err)
	}
	defer f.Close()
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("text corpus: read %s: %w", path, err)
	}
	return bytes.IndexByte(head[:n], 0) < 0, nil
}

// readPart returns the bytes of p. A file shorter than the listing said
// changed while the corpus was made: that is an error.
func readPart(p textPart) (string, error) {
	f, err := os.Open(p.path)
	if err != nil {
		return "", fmt.Errorf("text corpus: %w", err)
	}
	defer f.Close()
	var sb strings.Builder
	sb.Grow(int(p.size))
	n, err := io.Copy(&sb, io.NewSectionReader(f, p.offset, p.size))
	switch {
	case err != nil:
		return "", fmt.Errorf("text corpus: read %s: %w", p.path, err)
	case n < p.size:
		return "", fmt.Errorf("text corpus: %s changed while it was read: %d bytes from byte %d, want %d", p.path, n, p.offset, p.size)
	}
	return sb.String(), nil
}
