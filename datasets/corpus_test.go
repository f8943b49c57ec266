package datasets

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBuildCorpusMatchesLoadText(t *testing.T) {
	dir, _ := textTree(t)
	dst := filepath.Join(t.TempDir(), CorpusFile)
	opts := TextOptions{ValEvery: 3}
	info, err := BuildCorpus(dst, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Built || info.Files != 8 || info.Binary != 1 || info.TrainFiles != 6 || info.ValFiles != 2 ||
		info.Split != "one text file in 3 (files 2, 5, ... counting from 0, in file order)" {
		t.Fatalf("info %+v", info)
	}
	train, val, err := LoadCorpus(dst, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer train.Close()
	defer val.Close()
	memTrain, memVal, err := LoadText(dir, 3, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !train.Mapped() || !val.Mapped() {
		t.Fatalf("Mapped %v %v, want true", train.Mapped(), val.Mapped())
	}
	for _, p := range []struct {
		name          string
		mapped, inMem *TokenSource
		bytes         int64
	}{{"training", train, memTrain, info.TrainBytes}, {"validation", val, memVal, info.ValBytes}} {
		if got, want := sourceBytes(t, p.mapped), sourceBytes(t, p.inMem); !bytes.Equal(got, want) || int64(p.mapped.Tokens()) != p.bytes {
			t.Fatalf("%s part: %d mapped bytes (%d in windows) differ from LoadText's %d in windows", p.name, p.mapped.Tokens(), len(got), len(want))
		}
	}
	// Closing one part leaves the other readable.
	if err := train.Close(); err != nil {
		t.Fatal(err)
	}
	if got := sourceBytes(t, val); !bytes.Equal(got, sourceBytes(t, memVal)) {
		t.Fatalf("validation part after closing the training part: %q", got)
	}
}

func TestBuildCorpusRebuildsWhenStale(t *testing.T) {
	dir, _ := textTree(t)
	dst := filepath.Join(t.TempDir(), CorpusFile)
	build := func(opts TextOptions) CorpusInfo {
		t.Helper()
		info, err := BuildCorpus(dst, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	first := build(TextOptions{})
	if !first.Built || first.Split != "the last 1/20 of the bytes (fewer than 20 text files)" {
		t.Fatalf("first build: %+v", first)
	}
	if again := build(TextOptions{}); again.Built || again.Fingerprint != first.Fingerprint || again.TrainBytes != first.TrainBytes {
		t.Fatalf("second build of the same files rebuilt or changed: %+v", again)
	}
	steps := []struct {
		name   string
		change func()
		opts   TextOptions
	}{
		{"other options", func() {}, TextOptions{MaxBytes: 100}},
		{"an edited file", func() {
			os.WriteFile(filepath.Join(dir, "a.txt"), []byte("ALPHA\n"), 0o644)
			old := time.Now().Add(-time.Hour)
			os.Chtimes(filepath.Join(dir, "a.txt"), old, old)
		}, TextOptions{MaxBytes: 100}},
		{"a new file", func() { os.WriteFile(filepath.Join(dir, "new.txt"), []byte("new\n"), 0o644) }, TextOptions{MaxBytes: 100}},
		{"a truncated corpus", func() { os.Truncate(dst, corpusHeaderBytes+10) }, TextOptions{MaxBytes: 100}},
		{"a foreign file", func() { os.WriteFile(dst, []byte("not a corpus"), 0o644) }, TextOptions{MaxBytes: 100}},
	}
	for _, s := range steps {
		s.change()
		if info := build(s.opts); !info.Built {
			t.Fatalf("after %s: not rebuilt", s.name)
		}
	}
	train, _, err := LoadCorpus(dst, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer train.Close()
	if got := string(sourceBytes(t, train)); !strings.HasPrefix(got, "ALPHA\n") {
		t.Fatalf("rebuilt corpus starts %q, want the edited file", got[:10])
	}
	entries, _ := os.ReadDir(filepath.Dir(dst))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{CorpusFile, CorpusFile + ".lock"}; !slices.Equal(names, want) {
		t.Fatalf("the run directory holds %q, want only the corpus and its lock file %q (no temporary files)", names, want)
	}
}

func TestLoadCorpusErrors(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, CorpusFile)
	if _, err := BuildCorpus(dst, writeText(t, dir, "src.txt", strings.Repeat("abc", 100)), TextOptions{}); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	badMagic := bytes.Clone(good)
	copy(badMagic, "SDTEXT99")
	longDesc := bytes.Clone(good)
	longDesc[8], longDesc[9] = 0xff, 0xff
	cases := []struct {
		name    string
		data    []byte // nil: no file
		context int
		want    string
	}{
		{"missing", nil, 4, "load corpus: open DIR/c.bin: no such file or directory (BuildCorpus writes it)"},
		{"short", good[:100], 4, "load corpus DIR/c.bin: 100 bytes, shorter than the corpus header: not a corpus file BuildCorpus wrote"},
		{"magic", badMagic, 4, `load corpus DIR/c.bin: magic "SDTEXT99": want "SDTEXT01": not a corpus file BuildCorpus wrote`},
		{"description", longDesc, 4, "load corpus DIR/c.bin: header declares 65535+"},
		{"truncated", good[:len(good)-1], 4,
			"load corpus DIR/c.bin: header declares 285 training and 15 validation bytes but the file holds 299 after the header (truncated?)"},
		{"context too long", good, 20,
			"load text DIR/c.bin: validation part (0 files, 15 bytes): 15 tokens in 1 stream holds no window of 21 tokens: use more data or a shorter context"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "c.bin")
			os.Remove(path)
			if c.data != nil {
				if err := os.WriteFile(path, c.data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err := LoadCorpus(path, c.context)
			want := strings.ReplaceAll(c.want, "DIR", dir)
			if strings.HasSuffix(want, "+") {
				if err == nil || !strings.HasPrefix(err.Error(), want[:len(want)-1]) {
					t.Fatalf("error\n  %v\nwant one starting\n  %s", err, want)
				}
				return
			}
			if err == nil || err.Error() != want {
				t.Fatalf("error\n  %v\nwant\n  %s", err, want)
			}
		})
	}
}

// writeText writes one file and returns its path.
func writeText(t *testing.T, dir, name, text string) string {
	t.Helper()
	writeFiles(t, dir, map[string][]byte{name: []byte(text)})
	return filepath.Join(dir, name)
}

// BenchmarkBuildCorpusGoTree builds the whole default corpus, Go's source
// tree, as the train command does once per job (b.N builds; each rebuilds,
// since the previous file is removed); check-ms is the time of a call that
// finds the file up to date.
func BenchmarkBuildCorpusGoTree(b *testing.B) {
	if _, err := DefaultTextDir(); err != nil {
		b.Skip(err)
	}
	dst := filepath.Join(b.TempDir(), CorpusFile)
	var info CorpusInfo
	for b.Loop() {
		os.Remove(dst)
		var err error
		if info, err = BuildCorpus(dst, "", TextOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	start := time.Now()
	if again, err := BuildCorpus(dst, "", TextOptions{}); err != nil || again.Built {
		b.Fatalf("the up-to-date check rebuilt (%v) or failed: %v", again.Built, err)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "check-ms")
	b.ReportMetric(float64(info.TrainBytes+info.ValBytes)/(1<<20), "MiB")
	b.ReportMetric(float64(info.Files), "files")
	b.ReportMetric(float64(info.ValBytes)/float64(info.TrainBytes+info.ValBytes)*100, "val%")
}

// TestBuildCorpusOnceAtATime: builders of one corpus that start together
// (mpirun's ranks, two runs) build it once: one says Built, the others
// wait on the lock and find it current. Without the lock every one built.
func TestBuildCorpusOnceAtATime(t *testing.T) {
	dir, _ := textTree(t)
	dst := filepath.Join(t.TempDir(), CorpusFile)
	tok, err := NewTokenizer("gpt2")
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	built := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			info, err := BuildCorpus(dst, dir, TextOptions{Tokenizer: tok})
			if err != nil {
				t.Error(err)
			}
			built[i] = info.Built
		})
	}
	wg.Wait()
	count := 0
	for _, b := range built {
		if b {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("%d of %d concurrent builders built the corpus, want 1", count, n)
	}
}
