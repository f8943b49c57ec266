package datasets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// TextOptions says how LoadText and BuildCorpus make a text corpus.
type TextOptions struct {
	// Tokenizer encodes the text; nil (or the byte tokenizer) means
	// byte-level text, vocabulary 256, files concatenated as they are.
	// Another tokenizer (NewTokenizer("gpt2")) makes a corpus of its tokens,
	// vocabulary Tokenizer.Vocab(), each file a document led by the
	// tokenizer's EOT; see TokenizeText.
	Tokenizer Tokenizer
	// MaxBytes caps the corpus, both parts together, at its first
	// MaxBytes bytes in file order (the last file read may be cut); 0 means
	// no cap. Tests use a few MiB of the Go tree.
	MaxBytes int64
	// ValEvery is k: every k-th text file in file order (the k-th, 2k-th,
	// ...) is validation data, the others training data; 0 means
	// DefaultValEvery. With fewer than k text files, the last 1/k of the
	// bytes is validation data instead. k must be at least 2.
	ValEvery int
}

// DefaultValEvery holds out every 20th file, 5% of the data, for validation.
const DefaultValEvery = 20

// binaryProbe is how much of a file's start is searched for a NUL byte: a
// file with one there is binary and skipped.
const binaryProbe = 8 << 10

// withDefaults fills in the default ValEvery and checks the options.
func (o TextOptions) withDefaults() (TextOptions, error) {
	if o.ValEvery == 0 {
		o.ValEvery = DefaultValEvery
	}
	switch {
	case o.MaxBytes < 0:
		return o, fmt.Errorf("text corpus cap of %d bytes: must be 0 (none) or positive", o.MaxBytes)
	case o.ValEvery < 2:
		return o, fmt.Errorf("text corpus: validation every %d files: want 2 or more", o.ValEvery)
	}
	return o, nil
}

// CorpusInfo describes a text corpus: where it came from, how it was split
// and, for a corpus of tokens, how it was encoded. BuildCorpus records it in
// the corpus file's header.
type CorpusInfo struct {
	// Source is the file or directory read, absolute, symbolic links
	// resolved.
	Source string `json:"source"`
	// Fingerprint is a SHA-256 over the options and the listing of the
	// candidate files (paths, sizes, modification times): a corpus file
	// whose fingerprint differs is stale.
	Fingerprint string `json:"fingerprint"`
	MaxBytes    int64  `json:"max_bytes"`
	ValEvery    int    `json:"val_every"`
	// Files is the number of text files read (the last perhaps in part),
	// Binary the number skipped because a NUL byte is in their first 8 KiB.
	Files  int `json:"files"`
	Binary int `json:"binary_files_skipped"`
	// TrainFiles and ValFiles are the files of each part; with the
	// fallback split both are 0 and Split says so.
	TrainFiles int   `json:"train_files"`
	ValFiles   int   `json:"val_files"`
	TrainBytes int64 `json:"train_bytes"`
	ValBytes   int64 `json:"val_bytes"`
	// Split says in words how the validation part was chosen.
	Split string `json:"split"`
	// Tokenizer and Vocab name the tokenizer of a corpus of tokens and its
	// vocabulary; TrainTokens and ValTokens count the tokens of each part.
	// All four are empty for byte-level text, whose tokens are its bytes.
	Tokenizer   string `json:"tokenizer,omitempty"`
	Vocab       int    `json:"vocab,omitempty"`
	TrainTokens int64  `json:"train_tokens,omitempty"`
	ValTokens   int64  `json:"val_tokens,omitempty"`
	// Built reports that BuildCorpus wrote the file in this call (false:
	// the file was up to date). It is not stored.
	Built bool `json:"-"`
}

// DefaultTextDir returns the text read when none is named: the source tree
// of the Go distribution, GOROOT/src (about 90 MB of text in 1.26), which
// every machine that builds symddp has. GOROOT is taken from the
// environment variable $GOROOT, else from `go env GOROOT`, else from
// runtime.GOROOT(), the first of them whose src directory exists. When none
// does, the error says what was tried and to name a text directory instead.
func DefaultTextDir() (string, error) {
	goEnv := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
		return strings.TrimSpace(string(out)), err
	}
	return findGoSource(os.Getenv("GOROOT"), goEnv, runtime.GOROOT())
}

// findGoSource returns the src directory of the first of the three GOROOT
// candidates that has one.
func findGoSource(env string, goEnv func() (string, error), builtIn string) (string, error) {
	var tried []string
	try := func(what, root string) (string, bool) {
		if root == "" {
			tried = append(tried, what+" is empty")
			return "", false
		}
		src := filepath.Join(root, "src")
		if info, err := os.Stat(src); err != nil || !info.IsDir() {
			tried = append(tried, fmt.Sprintf("%s is %s, which has no src directory", what, root))
			return "", false
		}
		return src, true
	}
	if dir, ok := try("$GOROOT", env); ok {
		return dir, nil
	}
	if root, err := goEnv(); err != nil {
		tried = append(tried, fmt.Sprintf("`go env GOROOT` failed (%v)", err))
	} else if dir, ok := try("`go env GOROOT`", root); ok {
		return dir, nil
	}
	if dir, ok := try("runtime.GOROOT()", builtIn); ok {
		return dir, nil
	}
	return "", fmt.Errorf("no Go source tree for the default text corpus (%s): name a file or directory of text as the data directory, or install Go and set $GOROOT to it",
		strings.Join(tried, "; "))
}

// textFile is a file that may go into a corpus.
type textFile struct {
	path  string
	size  int64
	mtime int64 // Unix nanoseconds
}

// listTextFiles resolves src ("" means DefaultTextDir()) and lists the
// candidate files in it, in file order: src itself when it is a file, else
// the regular files below it as filepath.WalkDir visits them (each
// directory's entries sorted by name, depth first), leaving out names that
// start with "." (and what is below them), irregular files and the file
// exclude. A symbolic link to a file or a directory is followed (a Hugging
// Face snapshot is links to blobs), its files listed under the link's
// name; a broken link, and a file or directory already listed through
// another name (a link loop), are left out.
func listTextFiles(src, exclude string) (root string, files []textFile, err error) {
	if src == "" {
		if src, err = DefaultTextDir(); err != nil {
			return "", nil, err
		}
	}
	if root, err = filepath.Abs(src); err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return "", nil, fmt.Errorf("text corpus: %w", err)
	}
	if exclude != "" {
		if exclude, err = filepath.Abs(exclude); err != nil {
			return "", nil, fmt.Errorf("text corpus: %w", err)
		}
	}
	seen := map[string]bool{} // real paths listed or walked
	add := func(name, real string, info fs.FileInfo) {
		if real != exclude && !seen[real] {
			seen[real] = true
			files = append(files, textFile{path: name, size: info.Size(), mtime: info.ModTime().UnixNano()})
		}
	}
	// walk lists the real directory dir, reached as the path shown
	var walk func(dir, shown string) error
	walk = func(dir, shown string) error {
		return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := shown + strings.TrimPrefix(path, dir)
			if path != dir && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			switch {
			case d.IsDir():
				if path != dir && seen[path] {
					return filepath.SkipDir
				}
				seen[path] = true
			case d.Type().IsRegular():
				info, err := d.Info()
				if err != nil {
					return err
				}
				add(name, path, info)
			case d.Type()&fs.ModeSymlink != 0:
				real, err := filepath.EvalSymlinks(path)
				if err != nil {
					return nil // broken
				}
				info, err := os.Stat(real)
				switch {
				case err != nil:
				case info.Mode().IsRegular():
					add(name, real, info)
				case info.IsDir() && !seen[real]:
					return walk(real, name)
				}
			}
			return nil
		})
	}
	if err = walk(root, root); err != nil {
		return "", nil, fmt.Errorf("text corpus: %w", err)
	}
	return root, files, nil
}

// fingerprint hashes the options and the listing of files under root.
func fingerprint(root string, files []textFile, opts TextOptions) string {
	h := sha256.New()
	fmt.Fprintf(h, "symddp text corpus %d\x00%s\x00%d\x00%d\x00", corpusVersion, root, opts.MaxBytes, opts.ValEvery)
	var num [16]byte
	for _, f := range files {
		h.Write([]byte(f.path))
		binary.LittleEndian.PutUint64(num[0:], uint64(f.size))
		binary.LittleEndian.PutUint64(num[8:], uint64(f.mtime))
		h.Write(num[:])
	}
	if !isByteLevel(opts.Tokenizer) {
		// after the byte-level fields, so that a byte corpus keeps its
		// fingerprint
		fmt.Fprintf(h, "\x00tokens %d\x00%s\x00%d", tokenCorpusVersion, opts.Tokenizer.Name(), opts.Tokenizer.Vocab())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// collectText reads the text files among files in order, up to opts.MaxBytes
// bytes in all, writing the training part to train and the validation part
// to val; with the fallback split everything goes to train and the caller
// cuts its last ValBytes bytes off. opts has its defaults.
func collectText(root string, files []textFile, opts TextOptions, train io.Writer, val *bytes.Buffer) (CorpusInfo, error) {
	info := CorpusInfo{Source: root, Fingerprint: fingerprint(root, files, opts), MaxBytes: opts.MaxBytes, ValEvery: opts.ValEvery}
	head := make([]byte, binaryProbe)
	buf := make([]byte, 64<<10)
	left := opts.MaxBytes
	if left == 0 {
		left = 1<<63 - 1
	}
	for _, file := range files {
		if left == 0 {
			break
		}
		isText, n, err := copyTextFile(file.path, head, buf, left, func(j int) io.Writer {
			if j%opts.ValEvery == opts.ValEvery-1 {
				return val
			}
			return train
		}(info.Files))
		if err != nil {
			return info, err
		}
		if !isText {
			info.Binary++
			continue
		}
		if n == 0 {
			continue // an empty file
		}
		if info.Files%opts.ValEvery == opts.ValEvery-1 {
			info.ValFiles++
			info.ValBytes += n
		} else {
			info.TrainFiles++
			info.TrainBytes += n
		}
		info.Files++
		left -= n
	}
	total := info.TrainBytes + info.ValBytes
	switch {
	case info.Files == 0:
		return info, noText(root, info.Binary)
	case info.ValFiles > 0:
		info.Split = fmt.Sprintf("one text file in %d (files %d, %d, ... counting from 0, in file order)",
			opts.ValEvery, opts.ValEvery-1, 2*opts.ValEvery-1)
	default:
		info.ValBytes = total / int64(opts.ValEvery)
		info.TrainBytes = total - info.ValBytes
		info.TrainFiles = 0
		info.Split = fmt.Sprintf("the last 1/%d of the bytes (fewer than %d text files)", opts.ValEvery, opts.ValEvery)
	}
	return info, nil
}

// copyTextFile copies up to limit bytes of the file at path to w unless it
// is binary (a NUL byte among its first len(head) bytes). It returns whether
// the file is text and the bytes copied.
func copyTextFile(path string, head, buf []byte, limit int64, w io.Writer) (isText bool, n int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, 0, fmt.Errorf("text corpus: %w", err)
	}
	defer f.Close()
	h, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, 0, fmt.Errorf("text corpus: read %s: %w", path, err)
	}
	if bytes.IndexByte(head[:h], 0) >= 0 {
		return false, 0, nil
	}
	first := head[:min(int64(h), limit)]
	if _, err := w.Write(first); err != nil {
		return true, 0, fmt.Errorf("text corpus: copy %s: %w", path, err)
	}
	n = int64(len(first))
	if h < len(head) || n == limit {
		return true, n, nil
	}
	m, err := io.CopyBuffer(w, io.LimitReader(readOnly{f}, limit-n), buf)
	if err != nil {
		return true, n + m, fmt.Errorf("text corpus: copy %s: %w", path, err)
	}
	return true, n + m, nil
}

// readOnly hides a file's WriteTo, so io.CopyBuffer uses the buffer it is
// given.
type readOnly struct{ r io.Reader }

func (r readOnly) Read(p []byte) (int, error) { return r.r.Read(p) }

// LoadText reads a text corpus into memory and returns its windows of
// context tokens: path is a text file or a directory read recursively (""
// means DefaultTextDir(), Go's source tree). Files are taken in file order
// (each directory's entries sorted by name, depth first), skipping binary
// files (a NUL byte in the first 8 KiB) and names starting with "."
// (symbolic links are followed), and concatenated; every opts.ValEvery-th text file is
// validation data (see TextOptions). The split depends on the files and
// options alone, not on the PE count. By default the tokens are the bytes
// (vocabulary 256); with opts.Tokenizer they are its tokens, each file led
// by its EOT (see TokenizeText), encoded on GOMAXPROCS goroutines.
//
// Every process that calls LoadText holds its own copy; the PEs of a job
// should share one file instead: BuildCorpus once per job, then LoadCorpus
// in every PE.
func LoadText(path string, context int, opts TextOptions) (train, val *TokenSource, err error) {
	if err := checkWindowArgs(context, 256); err != nil {
		return nil, nil, fmt.Errorf("load text: %w", err)
	}
	if opts, err = opts.withDefaults(); err != nil {
		return nil, nil, fmt.Errorf("load text: %w", err)
	}
	root, files, err := listTextFiles(path, "")
	if err != nil {
		return nil, nil, fmt.Errorf("load text: %w", err)
	}
	if !isByteLevel(opts.Tokenizer) {
		return loadTokenText(root, files, context, opts)
	}
	var trainBuf, valBuf bytes.Buffer
	info, err := collectText(root, files, opts, &trainBuf, &valBuf)
	if err != nil {
		return nil, nil, fmt.Errorf("load text: %w", err)
	}
	trainBytes, valBytes := trainBuf.Bytes(), valBuf.Bytes()
	if info.ValFiles == 0 {
		trainBytes, valBytes = trainBytes[:info.TrainBytes], trainBytes[info.TrainBytes:]
	}
	return textSources(root, info, trainBytes, valBytes, context)
}

// textSources returns the windows of the two parts of a byte corpus.
func textSources(name string, info CorpusInfo, trainBytes, valBytes []byte, context int) (train, val *TokenSource, err error) {
	if train, err = newTokenSource([]tokenSegment{{u8: trainBytes}}, context, 256); err != nil {
		return nil, nil, fmt.Errorf("load text %s: training part (%d files, %d bytes): %w", name, info.TrainFiles, len(trainBytes), err)
	}
	if val, err = newTokenSource([]tokenSegment{{u8: valBytes}}, context, 256); err != nil {
		return nil, nil, fmt.Errorf("load text %s: validation part (%d files, %d bytes): %w", name, info.ValFiles, len(valBytes), err)
	}
	return train, val, nil
}

// ErrNoText is wrapped by the error of a text corpus without a text file:
// the path named holds nothing to train on (a command's input, exit 2).
var ErrNoText = errors.New("no text files")

// noText is ErrNoText for root, counting the binary files skipped.
func noText(root string, binary int) error {
	switch binary {
	case 0:
		return fmt.Errorf("text corpus: %w in %s", ErrNoText, root)
	case 1:
		return fmt.Errorf("text corpus: %w in %s (1 binary file skipped)", ErrNoText, root)
	}
	return fmt.Errorf("text corpus: %w in %s (%d binary files skipped)", ErrNoText, root, binary)
}
