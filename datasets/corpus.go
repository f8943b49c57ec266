package datasets

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/symddp/symddp/internal/tempfile"
)

// A corpus file, as BuildCorpus writes it: a header of corpusHeaderBytes
// (the magic "SDTEXT01", a little-endian uint32 n, n bytes of CorpusInfo as
// JSON, zeros), then the training bytes, then the validation bytes; for a
// corpus of tokens (CorpusInfo.Tokenizer set), the training tokens, then
// the validation tokens, little-endian, uint16 or, for a vocabulary over
// 65536, uint32. The header is a page, so the data is page-aligned in a
// mapping.
const (
	corpusMagic       = "SDTEXT01"
	corpusVersion     = 1 // goes into the fingerprint: a new layout rebuilds old files
	corpusHeaderBytes = 4096
)

// CorpusFile is a name for the corpus file in a job's run directory.
const CorpusFile = "text-corpus.bin"

// BuildCorpus writes the text corpus of src ("" means DefaultTextDir(),
// Go's source tree) into the file dst, made as LoadText makes it (bytes, or
// the tokens of opts.Tokenizer, encoded on GOMAXPROCS goroutines), unless
// dst already holds it: then it only lists the files (paths, sizes,
// modification times) and compares that fingerprint and the options, the
// tokenizer included, with dst's header. A stale, foreign or damaged dst is rebuilt; the
// new file is written beside dst and renamed over it when complete, so a
// reader never sees a partial file. The returned info says what dst holds
// and whether it was built now.
//
// The train command calls it in the launcher, before the PEs start, with dst
// in the user's cache directory (named by the source and the cap), so that
// later runs reuse the file; every PE then calls it again (finding the file
// current from the listing alone) and LoadCorpus(dst, context), which maps
// the file, so the PEs of a host share one copy. dst itself is never read
// as part of the corpus.
func BuildCorpus(dst, src string, opts TextOptions) (CorpusInfo, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return CorpusInfo{}, fmt.Errorf("build corpus %s: %w", dst, err)
	}
	if unlock, err := lockCorpus(dst); err == nil {
		defer unlock()
	}
	root, files, err := listTextFiles(src, dst)
	if err != nil {
		return CorpusInfo{}, fmt.Errorf("build corpus %s: %w", dst, err)
	}
	if old, err := ReadCorpusInfo(dst); err == nil && old.Source == root &&
		old.Fingerprint == fingerprint(root, files, opts) {
		return old, nil
	}
	write := writeCorpus
	if !isByteLevel(opts.Tokenizer) {
		write = writeTokenCorpus
	}
	info, err := write(dst, root, files, opts)
	if err != nil {
		return CorpusInfo{}, fmt.Errorf("build corpus %s: %w", dst, err)
	}
	info.Built = true
	return info, nil
}

// lockCorpus takes an exclusive lock (flock) on dst's lock file, dst +
// ".lock", so that processes that build the same corpus at once (the ranks
// of mpirun on a host, two runs started together) build it once: the
// others wait, then find it current. Where no lock file can be made (a
// read-only directory) BuildCorpus goes on without one.
func lockCorpus(dst string) (unlock func(), err error) {
	f, err := os.OpenFile(dst+".lock", os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}

// writeCorpus writes the byte corpus to a temporary file beside dst and
// renames it to dst.
func writeCorpus(dst, root string, files []textFile, opts TextOptions) (CorpusInfo, error) {
	return writeCorpusFile(dst, func(w io.Writer) (CorpusInfo, error) {
		var val bytes.Buffer
		info, err := collectText(root, files, opts, w, &val)
		if err != nil {
			return info, err
		}
		_, err = val.WriteTo(w)
		return info, err
	})
}

// writeCorpusFile makes a corpus file: a temporary file beside dst, room
// for the header, what body writes after it (the training part, then the
// validation part), the header of the info body returns, and a rename to
// dst, so that a reader never sees a partial file. On an error the
// temporary file is removed.
func writeCorpusFile(dst string, body func(w io.Writer) (CorpusInfo, error)) (info CorpusInfo, err error) {
	out, err := tempfile.Create(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return info, err
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(out.Name())
		}
	}()
	w := bufio.NewWriterSize(out, 1<<20)
	if _, err := w.Write(make([]byte, corpusHeaderBytes)); err != nil {
		return info, fmt.Errorf("write %s: %w", out.Name(), err)
	}
	if info, err = body(w); err != nil {
		return info, err
	}
	if err := w.Flush(); err != nil {
		return info, fmt.Errorf("write %s: %w", out.Name(), err)
	}
	head, err := encodeCorpusHeader(info)
	if err != nil {
		return info, err
	}
	if _, err := out.WriteAt(head, 0); err != nil {
		return info, fmt.Errorf("write %s: %w", out.Name(), err)
	}
	if err := out.Close(); err != nil {
		return info, fmt.Errorf("write %s: %w", out.Name(), err)
	}
	return info, os.Rename(out.Name(), dst)
}

// encodeCorpusHeader returns the header of a corpus file holding info.
func encodeCorpusHeader(info CorpusInfo) ([]byte, error) {
	js, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	if len(js) > corpusHeaderBytes-12 {
		return nil, fmt.Errorf("corpus header of %d bytes does not fit in %d (source path too long?)", len(js), corpusHeaderBytes-12)
	}
	head := make([]byte, corpusHeaderBytes)
	copy(head, corpusMagic)
	binary.LittleEndian.PutUint32(head[8:], uint32(len(js)))
	copy(head[12:], js)
	return head, nil
}

// ReadCorpusInfo reads the header of a corpus file BuildCorpus wrote and
// checks that the file's size matches it.
func ReadCorpusInfo(path string) (CorpusInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return CorpusInfo{}, fmt.Errorf("read corpus %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, corpusHeaderBytes)
	if _, err := io.ReadFull(f, head); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = errors.New("shorter than the corpus header: not a corpus file BuildCorpus wrote")
		}
		return CorpusInfo{}, fmt.Errorf("read corpus %s: %w", path, err)
	}
	stat, err := f.Stat()
	if err != nil {
		return CorpusInfo{}, fmt.Errorf("read corpus %s: %w", path, err)
	}
	info, err := parseCorpusHeader(head, stat.Size())
	if err != nil {
		return CorpusInfo{}, fmt.Errorf("read corpus %s: %w", path, err)
	}
	return info, nil
}

// parseCorpusHeader decodes a corpus header and checks it against the size
// of its file.
func parseCorpusHeader(head []byte, size int64) (CorpusInfo, error) {
	var info CorpusInfo
	if string(head[:8]) != corpusMagic {
		return info, fmt.Errorf("magic %q: want %q: not a corpus file BuildCorpus wrote", head[:8], corpusMagic)
	}
	n := binary.LittleEndian.Uint32(head[8:])
	if n > corpusHeaderBytes-12 {
		return info, fmt.Errorf("header declares %d bytes of description, more than fit in %d", n, corpusHeaderBytes-12)
	}
	if err := json.Unmarshal(head[12:12+n], &info); err != nil {
		return info, fmt.Errorf("header description: %w", err)
	}
	if info.Tokenizer != "" {
		return info, checkTokenCorpusSize(info, size)
	}
	if info.TrainBytes < 0 || info.ValBytes < 0 || corpusHeaderBytes+info.TrainBytes+info.ValBytes != size {
		return info, fmt.Errorf("header declares %d training and %d validation bytes but the file holds %d after the header (truncated?)",
			info.TrainBytes, info.ValBytes, size-corpusHeaderBytes)
	}
	return info, nil
}

// LoadCorpus memory-maps a corpus file BuildCorpus wrote and returns the
// windows of context tokens of its training and validation parts: bytes
// (vocabulary 256), or the tokens of the corpus's tokenizer (vocabulary
// CorpusInfo.Vocab, 50257 for gpt2). Each part has its own mapping of the file, so each can be closed
// on its own. It does not look at the source files: BuildCorpus decides
// whether the file is stale.
func LoadCorpus(path string, context int) (train, val *TokenSource, err error) {
	if err := checkWindowArgs(context, 256); err != nil {
		return nil, nil, fmt.Errorf("load corpus %s: %w", path, err)
	}
	var maps [2]*mapping
	for i := range maps {
		if maps[i], err = mapFile(path); err != nil {
			if i == 1 {
				maps[0].close()
			}
			if !errors.Is(err, fs.ErrNotExist) {
				err = fmt.Errorf("load corpus %s: %w", path, err)
			} else {
				err = fmt.Errorf("load corpus: %w (BuildCorpus writes it)", err)
			}
			return nil, nil, err
		}
	}
	fail := func(err error) (*TokenSource, *TokenSource, error) {
		maps[0].close()
		maps[1].close()
		return nil, nil, err
	}
	data := maps[0].data
	if len(maps[1].data) != len(data) {
		return fail(fmt.Errorf("load corpus %s: the file changed while it was mapped", path))
	}
	if len(data) < corpusHeaderBytes {
		return fail(fmt.Errorf("load corpus %s: %d bytes, shorter than the corpus header: not a corpus file BuildCorpus wrote", path, len(data)))
	}
	info, err := parseCorpusHeader(data[:corpusHeaderBytes], int64(len(data)))
	if err != nil {
		return fail(fmt.Errorf("load corpus %s: %w", path, err))
	}
	if info.Tokenizer != "" {
		train, val, err = tokenCorpusSources(path, info, maps[0].data, maps[1].data, context)
	} else {
		cut := corpusHeaderBytes + info.TrainBytes
		train, val, err = textSources(path, info, maps[0].data[corpusHeaderBytes:cut:cut], maps[1].data[cut:], context)
	}
	if err != nil {
		return fail(err)
	}
	train.maps, val.maps = maps[:1], maps[1:]
	return train, val, nil
}
