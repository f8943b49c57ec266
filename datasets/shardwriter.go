package datasets

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/symddp/symddp/internal/tempfile"
)

// ShardWriter writes token streams into llm.c's token shards (the .bin
// files LoadShards reads): a header of 256 little-endian int32 (magic
// 20240520, version 1, token count; for a vocabulary over 65536, magic
// 20240801 and version 7), then the tokens, little-endian uint16 (uint32).
//
// It takes a training and a validation stream and cuts each into shards of
// at most ShardTokens tokens. Shards are written as temporary files in the
// directory and get their names in Close, llm.c's: NAME_val_000000.bin,
// ... for the validation shards, numbered first, then NAME_train_00000k.bin,
// ... numbering on (with one validation shard, the first training shard is
// NAME_train_000001.bin). Abort removes the temporary files instead.
type ShardWriter struct {
	dir, name   string
	shardTokens int
	vocab       int
	splits      [2]shardSplit // training, validation
	closed      bool
}

// shardSplit is the shards of one split: the finished temporary files and
// the one being written.
type shardSplit struct {
	label  string // "train" or "val"
	done   []string
	file   *os.File
	w      *bufio.Writer
	n      int // tokens in file
	tokens int64
	buf    []byte
}

// NewShardWriter returns a writer of shards of at most shardTokens tokens
// (1 to 2^31-1: the header counts in an int32) below vocab, in the
// existing directory dir, named after name (no path separator).
func NewShardWriter(dir, name string, shardTokens, vocab int) (*ShardWriter, error) {
	switch {
	case shardTokens < 1 || shardTokens > math.MaxInt32:
		return nil, fmt.Errorf("shards of %d tokens: want 1 to %d", shardTokens, math.MaxInt32)
	case vocab < 1 || int64(vocab) > 1<<32:
		return nil, fmt.Errorf("shards of a vocabulary of %d tokens: want 1 to 2^32", vocab)
	case name == "" || strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator):
		return nil, fmt.Errorf("shard name %q: want a non-empty file name without a path separator", name)
	}
	if info, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("shard directory: %w", err)
	} else if !info.IsDir() {
		return nil, fmt.Errorf("shard directory %s is not a directory", dir)
	}
	return &ShardWriter{dir: dir, name: name, shardTokens: shardTokens, vocab: vocab,
		splits: [2]shardSplit{{label: "train"}, {label: "val"}}}, nil
}

// ShardPath is the name of shard index of a split ("train" or "val") that
// ShardWriter gives it: dir/NAME_SPLIT_%06d.bin.
func ShardPath(dir, name, split string, index int) string {
	return filepath.Join(dir, fmt.Sprintf("%s_%s_%06d.bin", name, split, index))
}

// Write appends tokens to the validation stream (val) or the training
// stream. A token outside [0, vocab) is an error, and nothing of tokens is
// written then.
func (w *ShardWriter) Write(val bool, tokens []int32) error {
	if w.closed {
		return errors.New("write shards: the writer is closed")
	}
	for i, t := range tokens {
		if t < 0 || int64(t) >= int64(w.vocab) {
			return fmt.Errorf("write shards: token %d at position %d is outside the vocabulary of %d", t, i, w.vocab)
		}
	}
	s := &w.splits[0]
	if val {
		s = &w.splits[1]
	}
	for len(tokens) > 0 {
		if s.file == nil {
			if err := w.startShard(s); err != nil {
				return err
			}
		}
		k := min(len(tokens), w.shardTokens-s.n)
		s.buf = appendTokensLE(s.buf[:0], tokens[:k], tokenWidth(w.vocab))
		if _, err := s.w.Write(s.buf); err != nil {
			return fmt.Errorf("write shard %s: %w", s.file.Name(), err)
		}
		s.n += k
		s.tokens += int64(k)
		tokens = tokens[k:]
		if s.n == w.shardTokens {
			if err := w.finishShard(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// startShard opens a temporary file for the next shard of s, its header
// zero until finishShard.
func (w *ShardWriter) startShard(s *shardSplit) error {
	f, err := tempfile.Create(w.dir, fmt.Sprintf(".%s_%s.tmp-*", w.name, s.label)) // os.Create's mode, not 0600
	if err != nil {
		return fmt.Errorf("write shards: %w", err)
	}
	s.file, s.w, s.n = f, bufio.NewWriterSize(f, 1<<20), 0
	if _, err := s.w.Write(make([]byte, shardHeaderBytes)); err != nil {
		return fmt.Errorf("write shard %s: %w", f.Name(), err)
	}
	return nil
}

// finishShard writes the header of s's open shard, syncs it and closes it.
func (w *ShardWriter) finishShard(s *shardSplit) error {
	f := s.file
	s.file = nil
	if err := s.w.Flush(); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("write shard %s: %w", f.Name(), err)
	}
	magic, version := int32(shardMagicU16), int32(shardVersionU16)
	if tokenWidth(w.vocab) == 4 {
		magic, version = shardMagicU32, shardVersionU32
	}
	head := make([]byte, shardHeaderBytes)
	binary.LittleEndian.PutUint32(head[0:], uint32(magic))
	binary.LittleEndian.PutUint32(head[4:], uint32(version))
	binary.LittleEndian.PutUint32(head[8:], uint32(s.n))
	_, err := f.WriteAt(head, 0)
	if err == nil {
		err = f.Sync() // on disk before Close renames it into place, as checkpoints are
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write shard %s: %w", f.Name(), err)
	}
	s.done = append(s.done, f.Name())
	return nil
}

// Tokens returns the tokens written so far to the training and the
// validation stream.
func (w *ShardWriter) Tokens() (train, val int64) { return w.splits[0].tokens, w.splits[1].tokens }

// Close finishes the open shards and gives every shard its name, the
// validation shards first; it returns the paths, validation shards first. A
// stream without tokens has no shard. After an error the temporary files
// left are removed, and so are the shards it had named already, the
// shards of the same names they replaced put back: the directory holds
// the old shards or all the new ones, never some of each.
func (w *ShardWriter) Close() ([]string, error) {
	if w.closed {
		return nil, errors.New("close shards: the writer is closed")
	}
	for i := range w.splits {
		if s := &w.splits[i]; s.file != nil {
			if err := w.finishShard(s); err != nil {
				w.Abort()
				return nil, err
			}
		}
	}
	w.closed = true
	var tmps, paths []string
	for _, s := range []*shardSplit{&w.splits[1], &w.splits[0]} {
		for _, tmp := range s.done {
			tmps = append(tmps, tmp)
			paths = append(paths, ShardPath(w.dir, w.name, s.label, len(paths)))
		}
		s.done = nil
	}
	// A shard that replaces one of the same name moves it aside first, so
	// that a rename failing part-way can put every old shard back: the
	// directory then holds the old shards, not some of each.
	var asides, replaced []string
	undo := func(placed int, err error) ([]string, error) {
		for _, p := range paths[:placed] {
			os.Remove(p)
		}
		for _, tmp := range tmps[placed:] {
			os.Remove(tmp)
		}
		for i := len(asides) - 1; i >= 0; i-- {
			if rerr := os.Rename(asides[i], replaced[i]); rerr != nil {
				err = fmt.Errorf("%w; and the shard it replaced stays at %s: %v", err, asides[i], rerr)
			}
		}
		return nil, fmt.Errorf("close shards: %w", err)
	}
	for i, tmp := range tmps {
		if _, err := os.Lstat(paths[i]); err == nil {
			aside := filepath.Join(w.dir, "."+filepath.Base(paths[i])+".replaced")
			if err := rename(paths[i], aside); err != nil {
				return undo(i, err)
			}
			asides, replaced = append(asides, aside), append(replaced, paths[i])
		}
		if err := rename(tmp, paths[i]); err != nil {
			return undo(i, err)
		}
	}
	for _, a := range asides {
		os.Remove(a)
	}
	return paths, nil
}

// rename is os.Rename (a variable for the tests of a rename that fails).
var rename = os.Rename

// Abort removes every temporary file of the writer; named shards (after
// Close) stay.
func (w *ShardWriter) Abort() {
	w.closed = true
	for i := range w.splits {
		s := &w.splits[i]
		if s.file != nil {
			s.file.Close()
			os.Remove(s.file.Name())
			s.file = nil
		}
		for _, tmp := range s.done {
			os.Remove(tmp)
		}
		s.done = nil
	}
}
