package datasets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"
)

// ErrBadShard is wrapped by every error that reports malformed token-shard
// content: a short header, an unknown magic or version, a token count that
// does not match the file's size, a token outside the vocabulary.
var ErrBadShard = errors.New("bad token shard")

// llm.c's token shards (the .bin files its data scripts write): a header of
// 256 little-endian int32 (magic, version, token count, then unused), then
// the tokens, little-endian, uint16 or uint32 as the magic says.
const (
	shardHeaderBytes = 256 * 4
	shardMagicU16    = 20240520 // GPT-2 tokens, uint16
	shardVersionU16  = 1
	shardMagicU32    = 20240801 // Llama 3 tokens, uint32
	shardVersionU32  = 7
)

// littleEndianHost reports whether this machine stores integers
// little-endian, as shards do: then their tokens are used in place.
var littleEndianHost = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// LoadShards memory-maps llm.c's token shards: the files trainGlob matches,
// in sorted order, are the training split, those valGlob matches the
// validation split ("" for none: val is then nil). Each split's windows are
// those of NewTokenSource over its shards, one stream per shard: windows do
// not straddle shards, and the last (n-1) mod context tokens of a shard of n
// tokens are in no window.
//
// Every shard's header is checked (magic 20240520 with version 1 for uint16
// tokens, magic 20240801 with version 7 for uint32, a token count that
// matches the file's size) and so is every token, against vocab, while
// loading: a scan of the mapped tokens, which brings them into the page
// cache (the processes of a host share those pages). An error is one line
// naming the file and the fault; content errors wrap ErrBadShard. A glob
// that matches nothing, or a file both globs match, is an error too.
//
// Close the sources to release the mappings.
func LoadShards(trainGlob, valGlob string, context, vocab int) (train, val *TokenSource, err error) {
	return loadShards(trainGlob, valGlob, context, vocab, true)
}

// LoadCheckedShards is LoadShards for shards whose tokens the caller has
// checked already, with LoadShards and the same vocabulary (a launcher
// before it starts its PEs, or the same process earlier): every header and
// size is checked again, the tokens are not scanned (a scan reads every
// page of the shards, seconds per process for fineweb-sized data on a cold
// disk). A token outside the vocabulary is then the caller's to catch.
func LoadCheckedShards(trainGlob, valGlob string, context, vocab int) (train, val *TokenSource, err error) {
	return loadShards(trainGlob, valGlob, context, vocab, false)
}

// loadShards is LoadShards, scanning the tokens when scan is true.
func loadShards(trainGlob, valGlob string, context, vocab int, scan bool) (train, val *TokenSource, err error) {
	if err := checkWindowArgs(context, vocab); err != nil {
		return nil, nil, fmt.Errorf("load shards: %w", err)
	}
	trainFiles, err := globShards("train", trainGlob)
	if err != nil {
		return nil, nil, err
	}
	var valFiles []string
	if valGlob != "" {
		if valFiles, err = globShards("val", valGlob); err != nil {
			return nil, nil, err
		}
		if err := checkSplitsDisjoint(trainGlob, valGlob, trainFiles, valFiles); err != nil {
			return nil, nil, err
		}
	}
	if train, err = loadShardSplit("train", trainGlob, trainFiles, context, vocab, scan); err != nil {
		return nil, nil, err
	}
	if valGlob != "" {
		if val, err = loadShardSplit("val", valGlob, valFiles, context, vocab, scan); err != nil {
			train.Close()
			return nil, nil, err
		}
		if tk, vk := shardKind(train.segs[0]), shardKind(val.segs[0]); tk != vk {
			train.Close()
			val.Close()
			return nil, nil, fmt.Errorf("load shards: the train shards (%s, %s) and the val shards (%s, %s) hold the tokens of different tokenizers: give both splits of one tokenizer",
				trainFiles[0], tk, valFiles[0], vk)
		}
	}
	return train, val, nil
}

// shardKind says which tokenizer's shard s is, by the header's magic.
func shardKind(s tokenSegment) string {
	if s.u32 != nil {
		return fmt.Sprintf("uint32 tokens, magic %d: Llama 3's", shardMagicU32)
	}
	return fmt.Sprintf("uint16 tokens, magic %d: GPT-2's", shardMagicU16)
}

// globShards returns the files glob matches, sorted, or an error when there
// are none.
func globShards(split, glob string) ([]string, error) {
	files, err := filepath.Glob(glob)
	switch {
	case err != nil:
		return nil, fmt.Errorf("load shards: %s glob %q: %w", split, glob, err)
	case len(files) == 0:
		return nil, fmt.Errorf("load shards: %s glob %q matches no files", split, glob)
	}
	return files, nil // Glob sorts them
}

// checkSplitsDisjoint reports a file that is both a training and a
// validation shard: the same path from both globs, or one file the globs
// spell differently (a relative and an absolute path, "./" or a symbolic
// link), which would validate on training data. A file that cannot be
// stat'ed is left to the loading to report.
func checkSplitsDisjoint(trainGlob, valGlob string, trainFiles, valFiles []string) error {
	stat := func(files []string) []os.FileInfo {
		infos := make([]os.FileInfo, len(files))
		for i, f := range files {
			infos[i], _ = os.Stat(f)
		}
		return infos
	}
	trainInfos, valInfos := stat(trainFiles), stat(valFiles)
	for i, f := range valFiles {
		for j, g := range trainFiles {
			switch {
			case f == g:
				return fmt.Errorf("load shards: %s matches both the train glob %q and the val glob %q", f, trainGlob, valGlob)
			case valInfos[i] != nil && trainInfos[j] != nil && os.SameFile(valInfos[i], trainInfos[j]):
				return fmt.Errorf("load shards: %s (val glob %q) and %s (train glob %q) are the same file: a shard goes in one split only",
					f, valGlob, g, trainGlob)
			}
		}
	}
	return nil
}

// loadShardSplit maps and checks the shards of one split (their tokens
// too when scan is true).
func loadShardSplit(split, glob string, files []string, context, vocab int, scan bool) (*TokenSource, error) {
	segs := make([]tokenSegment, 0, len(files))
	var maps []*mapping
	fail := func(err error) (*TokenSource, error) {
		for _, m := range maps {
			m.close()
		}
		return nil, err
	}
	for _, path := range files {
		m, err := mapFile(path)
		if err != nil {
			return fail(fmt.Errorf("load shards: read %s: %w", path, err))
		}
		maps = append(maps, m)
		s, err := parseShard(m.data)
		if err == nil && scan {
			err = checkShardTokens(s, vocab)
		}
		if err != nil {
			return fail(fmt.Errorf("load shards: read %s: %w", path, err))
		}
		if len(segs) > 0 && shardKind(s) != shardKind(segs[0]) {
			return fail(fmt.Errorf("load shards: %s shards %q mix tokenizers: %s (%s) and %s (%s)",
				split, glob, files[0], shardKind(segs[0]), path, shardKind(s)))
		}
		segs = append(segs, s)
	}
	d, err := newTokenSource(segs, context, vocab)
	if err != nil {
		return fail(fmt.Errorf("load shards: %s shards %q: %w", split, glob, err))
	}
	d.maps = maps
	return d, nil
}

// VocabError is a shard's token outside the vocabulary it was loaded for
// (wrapped with ErrBadShard): the shards hold ids of a larger vocabulary,
// or are not token shards of this tokenizer.
type VocabError struct {
	Token    int   // the first token outside
	Position int64 // its index among the shard's tokens
	Vocab    int   // the vocabulary the shards were loaded for
}

func (e *VocabError) Error() string {
	return fmt.Sprintf("token %d at position %d is outside the vocabulary of %d", e.Token, e.Position, e.Vocab)
}

// checkShardTokens reports the first token of s outside the vocabulary.
func checkShardTokens(s tokenSegment, vocab int) error {
	if i, tok := firstOutside(s, vocab); i >= 0 {
		return fmt.Errorf("%w: %w", ErrBadShard, &VocabError{Token: int(tok), Position: int64(i), Vocab: vocab})
	}
	return nil
}

// parseShard checks the header of a shard held whole in data and returns its
// tokens: a view of data when this host is little-endian and the tokens are
// aligned, else a decoded copy.
func parseShard(data []byte) (tokenSegment, error) {
	if len(data) < shardHeaderBytes {
		return tokenSegment{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrBadShard, len(data), shardHeaderBytes)
	}
	magic := int32(binary.LittleEndian.Uint32(data[0:]))
	version := int32(binary.LittleEndian.Uint32(data[4:]))
	count := int32(binary.LittleEndian.Uint32(data[8:]))
	var width int
	switch magic {
	case shardMagicU16:
		width = 2
		if version != shardVersionU16 {
			return tokenSegment{}, fmt.Errorf("%w: version %d with magic %d (uint16 tokens): want version %d",
				ErrBadShard, version, magic, shardVersionU16)
		}
	case shardMagicU32:
		width = 4
		if version != shardVersionU32 {
			return tokenSegment{}, fmt.Errorf("%w: version %d with magic %d (uint32 tokens): want version %d",
				ErrBadShard, version, magic, shardVersionU32)
		}
	default:
		return tokenSegment{}, fmt.Errorf("%w: magic %d: want %d (uint16 tokens) or %d (uint32 tokens)",
			ErrBadShard, magic, shardMagicU16, shardMagicU32)
	}
	body := data[shardHeaderBytes:]
	if count < 0 {
		return tokenSegment{}, fmt.Errorf("%w: negative token count %d", ErrBadShard, count)
	}
	if want := int64(count) * int64(width); int64(len(body)) != want {
		return tokenSegment{}, fmt.Errorf("%w: header declares %d tokens (%d bytes after the header) but the file holds %d bytes after it",
			ErrBadShard, count, want, len(body))
	}
	if width == 2 {
		return tokenSegment{u16: shardTokens[uint16](body, binary.LittleEndian.Uint16)}, nil
	}
	return tokenSegment{u32: shardTokens[uint32](body, binary.LittleEndian.Uint32)}, nil
}

// shardTokens returns body as little-endian tokens of type T: body itself,
// reinterpreted, when possible; a decoded copy on a big-endian host or when
// body is not aligned for T.
func shardTokens[T uint16 | uint32](body []byte, decode func([]byte) T) []T {
	var zero T
	w := int(unsafe.Sizeof(zero))
	n := len(body) / w
	if n == 0 {
		return []T{}
	}
	if p := unsafe.Pointer(unsafe.SliceData(body)); littleEndianHost && uintptr(p)%uintptr(w) == 0 {
		return unsafe.Slice((*T)(p), n)
	}
	out := make([]T, n)
	for i := range out {
		out[i] = decode(body[i*w:])
	}
	return out
}
