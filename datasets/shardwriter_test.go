package datasets

import (
	"encoding/binary"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestShardWriterRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := NewShardWriter(dir, "doc", 5, 50257)
	if err != nil {
		t.Fatal(err)
	}
	train, val := int32s(100, 12), []int32{50256, 1, 2}
	for _, step := range []struct {
		val    bool
		tokens []int32
	}{{false, train[:4]}, {true, val}, {false, train[4:]}} {
		if err := w.Write(step.val, step.tokens); err != nil {
			t.Fatal(err)
		}
	}
	if tr, va := w.Tokens(); tr != 12 || va != 3 {
		t.Fatalf("Tokens %d %d, want 12 3", tr, va)
	}
	paths, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	// 3 validation tokens: one shard, number 0; 12 training tokens in
	// shards of 5: numbers 1 to 3.
	want := []string{"doc_val_000000.bin", "doc_train_000001.bin", "doc_train_000002.bin", "doc_train_000003.bin"}
	for i := range want {
		want[i] = filepath.Join(dir, want[i])
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths %v, want %v", paths, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != len(want) {
		t.Fatalf("%d files in the directory, want %d (no temporary files)", len(entries), len(want))
	}
	head, err := os.ReadFile(want[1])
	if err != nil {
		t.Fatal(err)
	}
	if magic, version, count := binary.LittleEndian.Uint32(head), binary.LittleEndian.Uint32(head[4:]), binary.LittleEndian.Uint32(head[8:]); magic != 20240520 ||
		version != 1 || count != 5 || len(head) != 1024+10 || binary.LittleEndian.Uint16(head[1024:]) != 100 {
		t.Fatalf("first training shard: magic %d version %d count %d, %d bytes", magic, version, count, len(head))
	}
	trainSrc, valSrc, err := LoadShards(filepath.Join(dir, "doc_train_*.bin"), filepath.Join(dir, "doc_val_*.bin"), 1, 50304)
	if err != nil {
		t.Fatal(err)
	}
	defer trainSrc.Close()
	defer valSrc.Close()
	if trainSrc.Streams() != 3 || trainSrc.Tokens() != 12 || !slices.Equal(sourceTokens(t, valSrc), val) {
		t.Fatalf("read back: %d training streams of %d tokens, validation %v", trainSrc.Streams(), trainSrc.Tokens(), sourceTokens(t, valSrc))
	}
}

func TestShardWriterErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		dir, name     string
		tokens, vocab int
		want          string
	}{
		{dir, "x", 0, 10, "shards of 0 tokens: want 1 to 2147483647"},
		{dir, "x", 1 << 31, 10, "shards of 2147483648 tokens: want 1 to 2147483647"},
		{dir, "a/b", 10, 10, `shard name "a/b": want a non-empty file name without a path separator`},
		{filepath.Join(dir, "nope"), "x", 10, 10, "shard directory: stat " + filepath.Join(dir, "nope") + ": no such file or directory"},
	} {
		if _, err := NewShardWriter(c.dir, c.name, c.tokens, c.vocab); err == nil || err.Error() != c.want {
			t.Errorf("NewShardWriter(%q, %q, %d, %d): %v, want %s", c.dir, c.name, c.tokens, c.vocab, err, c.want)
		}
	}
	w, err := NewShardWriter(dir, "x", 4, 256)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(false, []int32{1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(false, []int32{1, 256}); err == nil || err.Error() != "write shards: token 256 at position 1 is outside the vocabulary of 256" {
		t.Fatalf("token outside the vocabulary: %v", err)
	}
	w.Abort()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("Abort left %d files", len(entries))
	}
	if err := w.Write(true, []int32{1}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Write after Abort: %v", err)
	}
}

// TestShardWriterReplacesAllOrNone: shards written over shards of the same
// name (tokenize --force) replace them all, or, when a rename fails at any
// point, leave the directory as it was, the old shards' bytes back in
// place and nothing else; the shards moved aside are gone after a success.
func TestShardWriterReplacesAllOrNone(t *testing.T) {
	write := func(dir string, train int) ([]string, error) {
		w, err := NewShardWriter(dir, "doc", 5, 50257)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(true, []int32{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		if err := w.Write(false, int32s(train, train)); err != nil {
			t.Fatal(err)
		}
		return w.Close()
	}
	snapshot := func(dir string) map[string]string {
		out := map[string]string{}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			out[e.Name()] = string(b)
		}
		return out
	}
	defer func() { rename = os.Rename }()
	// the old set: 1 validation and 2 training shards; the new one 1 and 3
	// (three of the old names, moved aside and renamed: 2 renames each, and
	// one new name: 1), 7 renames, each of which fails in one run
	for fail := 1; fail <= 8; fail++ {
		dir := t.TempDir()
		rename = os.Rename
		if _, err := write(dir, 10); err != nil {
			t.Fatal(err)
		}
		before := snapshot(dir)
		calls := 0
		rename = func(from, to string) error {
			if calls++; calls == fail {
				return &os.LinkError{Op: "rename", Old: from, New: to, Err: os.ErrPermission}
			}
			return os.Rename(from, to)
		}
		paths, err := write(dir, 15)
		after := snapshot(dir)
		if fail > 7 { // no rename failed: the new set, nothing aside
			if err != nil || len(paths) != 4 || len(after) != 4 {
				t.Fatalf("no failure: %v, paths %v, directory %v", err, paths, slices.Sorted(maps.Keys(after)))
			}
			continue
		}
		if err == nil || paths != nil {
			t.Fatalf("rename %d failing: paths %v, err %v; want an error", fail, paths, err)
		}
		if !maps.Equal(before, after) {
			t.Fatalf("rename %d failing: the directory holds %v, want the old shards as they were: %v",
				fail, slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
		}
	}
}
