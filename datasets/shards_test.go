package datasets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// encodeShard writes a shard header (magic, version, count) and tokens, each
// of width bytes, little-endian.
func encodeShard(magic, version, count int32, width int, tokens []uint32) []byte {
	out := make([]byte, shardHeaderBytes, shardHeaderBytes+width*len(tokens))
	binary.LittleEndian.PutUint32(out[0:], uint32(magic))
	binary.LittleEndian.PutUint32(out[4:], uint32(version))
	binary.LittleEndian.PutUint32(out[8:], uint32(count))
	for _, v := range tokens {
		if width == 2 {
			out = binary.LittleEndian.AppendUint16(out, uint16(v))
		} else {
			out = binary.LittleEndian.AppendUint32(out, v)
		}
	}
	return out
}

// shard16 and shard32 encode valid shards of tokens.
func shard16(tokens ...uint32) []byte {
	return encodeShard(shardMagicU16, shardVersionU16, int32(len(tokens)), 2, tokens)
}

func shard32(tokens ...uint32) []byte {
	return encodeShard(shardMagicU32, shardVersionU32, int32(len(tokens)), 4, tokens)
}

func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadShards(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{
		// Sorted order is train_000 then train_001 whatever the map's order.
		"train_001.bin": shard32(100, 101, 102, 103, 104),     // 2 windows of 2+1
		"train_000.bin": shard32(0, 1, 2, 3, 50256, 5),        // 2 windows, token 5 in none
		"val_000.bin":   shard32(7, 8, 9, 65536+9, 50000, 42), // 2 windows
		"other.bin":     shard16(1, 2, 3),                     // matched by neither glob
	})
	train, val, err := LoadShards(filepath.Join(dir, "train_*.bin"), filepath.Join(dir, "val_*.bin"), 2, 65546)
	if err != nil {
		t.Fatal(err)
	}
	defer train.Close()
	defer val.Close()
	if train.Len() != 4 || train.Streams() != 2 || train.Tokens() != 11 || !train.Mapped() || train.Unread() != 1 {
		t.Fatalf("train: Len %d Streams %d Tokens %d Mapped %v Unread %d, want 4 2 11 true 1 (token 5)",
			train.Len(), train.Streams(), train.Tokens(), train.Mapped(), train.Unread())
	}
	wantTrain := [][2][]int32{{{0, 1}, {1, 2}}, {{2, 3}, {3, 50256}}, {{100, 101}, {101, 102}}, {{102, 103}, {103, 104}}}
	for i, w := range wantTrain {
		if x, y := gatherOne(t, train, i); !slices.Equal(x, w[0]) || !slices.Equal(y, w[1]) {
			t.Fatalf("train window %d: inputs %v targets %v, want %v %v", i, x, y, w[0], w[1])
		}
	}
	if val.Len() != 2 || val.Vocab() != 65546 {
		t.Fatalf("val: Len %d Vocab %d, want 2 65546", val.Len(), val.Vocab())
	}
	if x, y := gatherOne(t, val, 1); !slices.Equal(x, []int32{9, 65545}) || !slices.Equal(y, []int32{65545, 50000}) {
		t.Fatalf("val window 1: inputs %v targets %v", x, y)
	}
	if err := train.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := train.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestLoadCheckedShards: the loader for shards already scanned checks the
// headers and sizes again but not the tokens.
func TestLoadCheckedShards(t *testing.T) {
	dir := t.TempDir()
	bad := shard16(1, 2, 300, 4, 5) // 300 is outside a byte vocabulary
	long := shard16(1, 2, 3)
	binary.LittleEndian.PutUint32(long[8:], 2)
	writeFiles(t, dir, map[string][]byte{"t.bin": bad, "v.bin": shard16(1, 2, 3, 4), "long.bin": long})
	tg, vg := filepath.Join(dir, "t.bin"), filepath.Join(dir, "v.bin")
	if _, _, err := LoadShards(tg, vg, 2, 256); !errors.Is(err, ErrBadShard) {
		t.Fatalf("LoadShards: %v, want the token outside the vocabulary", err)
	}
	train, val, err := LoadCheckedShards(tg, vg, 2, 256)
	if err != nil {
		t.Fatalf("LoadCheckedShards: %v", err)
	}
	train.Close()
	val.Close()
	_, _, err = LoadCheckedShards(filepath.Join(dir, "long.bin"), vg, 2, 256)
	if !errors.Is(err, ErrBadShard) || !strings.Contains(err.Error(), "header declares 2 tokens") {
		t.Fatalf("LoadCheckedShards of a bad header: %v", err)
	}
}

func TestLoadShardsWithoutVal(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"a.bin": shard16(1, 2, 3)})
	train, val, err := LoadShards(filepath.Join(dir, "*.bin"), "", 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer train.Close()
	if val != nil || train.Len() != 1 {
		t.Fatalf("val %v, train.Len %d: want nil and 1", val, train.Len())
	}
}

func TestLoadShardsErrors(t *testing.T) {
	good := shard16(1, 2, 3, 4, 5)
	long := shard16(1, 2, 3)
	short := shard16(1, 2, 3)
	binary.LittleEndian.PutUint32(long[8:], 2)
	binary.LittleEndian.PutUint32(short[8:], 4)
	cases := []struct {
		name  string
		shard []byte // the train shard t.bin; nil: none
		train string // the train glob; "" means t.bin
		vocab int
		want  string // with DIR for the directory; the whole message
		bad   bool   // the error wraps ErrBadShard
	}{
		{name: "short header", shard: good[:1023],
			want: "load shards: read DIR/t.bin: bad token shard: 1023 bytes, shorter than the 1024-byte header", bad: true},
		{name: "empty file", shard: []byte{},
			want: "load shards: read DIR/t.bin: bad token shard: 0 bytes, shorter than the 1024-byte header", bad: true},
		{name: "bad magic", shard: encodeShard(20240521, 1, 1, 2, []uint32{1}),
			want: "load shards: read DIR/t.bin: bad token shard: magic 20240521: want 20240520 (uint16 tokens) or 20240801 (uint32 tokens)", bad: true},
		{name: "uint16 version", shard: encodeShard(shardMagicU16, 7, 1, 2, []uint32{1}),
			want: "load shards: read DIR/t.bin: bad token shard: version 7 with magic 20240520 (uint16 tokens): want version 1", bad: true},
		{name: "uint32 version", shard: encodeShard(shardMagicU32, 1, 1, 4, []uint32{1}),
			want: "load shards: read DIR/t.bin: bad token shard: version 1 with magic 20240801 (uint32 tokens): want version 7", bad: true},
		{name: "negative count", shard: encodeShard(shardMagicU16, 1, -3, 2, []uint32{1}),
			want: "load shards: read DIR/t.bin: bad token shard: negative token count -3", bad: true},
		{name: "count below size", shard: long,
			want: "load shards: read DIR/t.bin: bad token shard: header declares 2 tokens (4 bytes after the header) but the file holds 6 bytes after it", bad: true},
		{name: "count above size", shard: short,
			want: "load shards: read DIR/t.bin: bad token shard: header declares 4 tokens (8 bytes after the header) but the file holds 6 bytes after it", bad: true},
		{name: "odd byte", shard: append(slices.Clone(good), 0),
			want: "load shards: read DIR/t.bin: bad token shard: header declares 5 tokens (10 bytes after the header) but the file holds 11 bytes after it", bad: true},
		{name: "token outside vocabulary", shard: shard32(1, 2, 50257, 3), vocab: 50257,
			want: "load shards: read DIR/t.bin: bad token shard: token 50257 at position 2 is outside the vocabulary of 50257", bad: true},
		{name: "no window", shard: shard16(1, 2),
			want: `load shards: train shards "DIR/t.bin": 2 tokens in 1 stream holds no window of 3 tokens: use more data or a shorter context`},
		{name: "empty train glob", train: "DIR/none-*.bin",
			want: `load shards: train glob "DIR/none-*.bin" matches no files`},
		{name: "bad pattern", train: "DIR/[",
			want: `load shards: train glob "DIR/[": syntax error in pattern`},
		{name: "both globs", shard: good, train: "DIR/*.bin",
			want: `load shards: DIR/v.bin matches both the train glob "DIR/*.bin" and the val glob "DIR/v*.bin"`},
		// the tokens of another tokenizer: Llama 3's train shard beside
		// GPT-2's val shard (v.bin), and the two in one split
		{name: "splits of two tokenizers", shard: shard32(1, 2, 3, 4, 5),
			want: "load shards: the train shards (DIR/t.bin, uint32 tokens, magic 20240801: Llama 3's) and the val shards (DIR/v.bin, uint16 tokens, magic 20240520: GPT-2's) hold the tokens of different tokenizers: give both splits of one tokenizer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string][]byte{"v.bin": good}
			if c.shard != nil {
				files["t.bin"] = c.shard
			}
			writeFiles(t, dir, files)
			glob := filepath.Join(dir, "t.bin")
			if c.train != "" {
				glob = strings.ReplaceAll(c.train, "DIR", dir)
			}
			vocab := c.vocab
			if vocab == 0 {
				vocab = 50257
			}
			_, _, err := LoadShards(glob, filepath.Join(dir, "v*.bin"), 2, vocab)
			want := strings.ReplaceAll(c.want, "DIR", dir)
			if err == nil || err.Error() != want {
				t.Fatalf("error\n  %v\nwant\n  %s", err, want)
			}
			if errors.Is(err, ErrBadShard) != c.bad {
				t.Fatalf("errors.Is(err, ErrBadShard) = %v, want %v", !c.bad, c.bad)
			}
		})
	}
}

// One split's shards of two tokenizers (GPT-2's uint16, Llama 3's uint32)
// are refused, naming a file of each: their ids mean other tokens.
func TestLoadShardsOfTwoTokenizers(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"t1.bin": shard16(1, 2, 3, 4), "t2.bin": shard32(1, 2, 3, 4)})
	_, _, err := LoadShards(filepath.Join(dir, "t*.bin"), "", 2, 50257)
	want := fmt.Sprintf(`load shards: train shards "%s/t*.bin" mix tokenizers: %s/t1.bin (uint16 tokens, magic 20240520: GPT-2's) and %s/t2.bin (uint32 tokens, magic 20240801: Llama 3's)`, dir, dir, dir)
	if err == nil || err.Error() != want {
		t.Fatalf("error\n  %v\nwant\n  %s", err, want)
	}
}

func TestLoadShardsValErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"t.bin": shard16(1, 2, 3), "v.bin": shard16(1, 2, 9)})
	_, _, err := LoadShards(filepath.Join(dir, "t.bin"), filepath.Join(dir, "none*"), 2, 4)
	if want := fmt.Sprintf(`load shards: val glob "%s/none*" matches no files`, dir); err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
	_, _, err = LoadShards(filepath.Join(dir, "t.bin"), filepath.Join(dir, "v.bin"), 2, 4)
	if want := fmt.Sprintf("load shards: read %s/v.bin: bad token shard: token 9 at position 2 is outside the vocabulary of 4", dir); err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
	// The token and the vocabulary reach a program (train's advice) as a
	// VocabError, and the error is still a bad shard.
	var ve *VocabError
	if !errors.As(err, &ve) || *ve != (VocabError{Token: 9, Position: 2, Vocab: 4}) || !errors.Is(err, ErrBadShard) {
		t.Fatalf("error %v: VocabError %+v, ErrBadShard %v", err, ve, errors.Is(err, ErrBadShard))
	}
}

// TestLoadShardsSameFileSpelledTwice checks that one file matched by both
// globs is refused however each glob spells it: a relative and an absolute
// path, a "./" prefix, a symbolic link. Accepting it would validate on
// training data without a word.
func TestLoadShardsSameFileSpelledTwice(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"t.bin": shard16(1, 2, 3, 4, 5)})
	if err := os.Symlink(filepath.Join(dir, "t.bin"), filepath.Join(dir, "link.bin")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	abs := filepath.Join(dir, "t.bin")
	for _, c := range []struct{ train, val string }{
		{"t.bin", abs},
		{abs, "./t.bin"},
		{"t*.bin", "l*.bin"},
	} {
		_, _, err := LoadShards(c.train, c.val, 2, 50257)
		if err == nil || !strings.Contains(err.Error(), "are the same file: a shard goes in one split only") {
			t.Errorf("train %q, val %q: error %v, want the same file refused", c.train, c.val, err)
		}
	}
	// two files, each in one split, still load
	writeFiles(t, dir, map[string][]byte{"v.bin": shard16(1, 2, 3)})
	train, val, err := LoadShards(abs, "./v.bin", 2, 50257)
	if err != nil {
		t.Fatal(err)
	}
	train.Close()
	val.Close()
}

// TestParseShardUnaligned checks the decoded copy taken for tokens that are
// not aligned in memory.
func TestParseShardUnaligned(t *testing.T) {
	data := append([]byte{0}, shard32(1, 70000, 3)...)[1:]
	s, err := parseShard(data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.u32, []uint32{1, 70000, 3}) {
		t.Fatalf("tokens %v", s.u32)
	}
}

// FuzzReadShard feeds parseShard a header's three fields and a body, cut
// to cut bytes when cut is below the length: the 1012 unused header bytes
// stay zero, which keeps the inputs small enough for the fuzzer to minimise.
func FuzzReadShard(f *testing.F) {
	for _, seed := range []struct {
		magic, version, count int32
		body                  []byte
		cut                   uint16
	}{
		{shardMagicU16, 1, 4, []byte{1, 0, 2, 0, 3, 0, 0x4f, 0xc4}, 0xffff},
		{shardMagicU32, 7, 2, []byte{1, 0, 0, 0, 0, 0, 0x10, 0}, 0xffff},
		{shardMagicU16, 1, 2, []byte{1, 0, 2}, 0xffff},
		{shardMagicU16, 1, 1, []byte{1, 0}, 1023},
		{shardMagicU16, 1, -1, nil, 0xffff},
		{shardMagicU32, 1, 0, nil, 0xffff},
		{shardMagicU16, 7, 0, nil, 0xffff},
		{shardMagicU16, 1, 1 << 30, nil, 0xffff},
		{20240519, 1, 0, nil, 0xffff},
		{0, 0, 0, nil, 0},
	} {
		f.Add(seed.magic, seed.version, seed.count, seed.body, seed.cut, uint32(50257))
	}
	f.Fuzz(func(t *testing.T, magic, version, count int32, body []byte, cut uint16, vocab uint32) {
		data := make([]byte, shardHeaderBytes, shardHeaderBytes+len(body))
		binary.LittleEndian.PutUint32(data[0:], uint32(magic))
		binary.LittleEndian.PutUint32(data[4:], uint32(version))
		binary.LittleEndian.PutUint32(data[8:], uint32(count))
		data = append(data, body...)
		if int(cut) < len(data) {
			data = data[:cut]
		}
		s, err := parseShard(data)
		if err != nil {
			if !errors.Is(err, ErrBadShard) {
				t.Fatalf("error %q does not wrap ErrBadShard", err)
			}
			return
		}
		width := 2
		if s.u32 != nil {
			width = 4
		}
		if (s.u16 == nil) == (s.u32 == nil) || s.len() != int(count) || len(data) != shardHeaderBytes+width*int(count) ||
			(width == 2) != (magic == shardMagicU16) {
			t.Fatalf("magic %d, %d bytes of count %d parsed as %d tokens of width %d", magic, len(data), count, s.len(), width)
		}
		tokens := make([]uint32, s.len())
		for i := range tokens {
			if width == 2 {
				tokens[i] = uint32(s.u16[i])
			} else {
				tokens[i] = s.u32[i]
			}
		}
		if again := encodeShard(magic, version, count, width, tokens); !slices.Equal(again, data) {
			t.Fatalf("tokens %v do not re-encode to the shard", tokens)
		}
		v := int(vocab%(1<<31) + 1)
		err = checkShardTokens(s, v)
		over := slices.IndexFunc(tokens, func(tok uint32) bool { return int64(tok) >= int64(v) })
		switch {
		case over < 0 && err != nil:
			t.Fatalf("vocabulary %d: %v, but every token is below it", v, err)
		case over >= 0 && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("token %d at position %d is", tokens[over], over))):
			t.Fatalf("vocabulary %d: error %v, want one naming token %d at %d", v, err, tokens[over], over)
		}
	})
}

// BenchmarkShardVocabCheck100M scans 100 M uint16 tokens (a 200 MB shard)
// for one outside GPT-2's vocabulary, the check LoadShards makes per shard.
func BenchmarkShardVocabCheck100M(b *testing.B) {
	tokens := make([]uint16, 100_000_000)
	for i := range tokens {
		tokens[i] = uint16(i % 50257)
	}
	s := tokenSegment{u16: tokens}
	b.SetBytes(int64(2 * len(tokens)))
	for b.Loop() {
		if err := checkShardTokens(s, 50257); err != nil {
			b.Fatal(err)
		}
	}
}
