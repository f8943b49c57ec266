package datasets

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// TokenizeOptions says how TokenizeText reads and encodes text.
type TokenizeOptions struct {
	// TextOptions: the tokenizer (nil means byte-level), the split and the
	// cap, as for BuildCorpus.
	TextOptions
	// Workers is the number of goroutines that encode; 0 means GOMAXPROCS.
	// The tokens do not depend on it.
	Workers int
	// Verify decodes every document's tokens and compares them with its
	// text: a difference is an error naming the file.
	Verify bool
	// Progress, when set, is called with (0, total) before the first
	// document is read and then after each document, with the bytes of
	// text encoded so far and in all.
	Progress func(done, total int64)
}

// TokenizeText encodes the text files of paths (files or directories; ""
// means DefaultTextDir()) with opts.Tokenizer and calls emit with each
// document's tokens, in file order: the text files of each path in turn,
// chosen and split as BuildCorpus chooses and splits them (binary files,
// empty files and names starting with "." skipped, symbolic links
// followed; every
// opts.ValEvery-th text file to validation, or the last 1/ValEvery of the
// bytes when there are fewer text files). A document is one file, its
// tokens led by the tokenizer's EOT (GPT-2's <|endoftext|>, as llm.c's
// data scripts put it before every document); when the fallback split cuts
// a file, its validation part continues the document, without an EOT.
//
// The files are encoded on opts.Workers goroutines, a few files each in
// memory at once; emit is called from the calling goroutine, in order, and
// must not keep tokens past its return. An error from emit stops the work
// and is returned. The info counts files, bytes and tokens per split.
func TokenizeText(paths []string, opts TokenizeOptions, emit func(val bool, tokens []int32) error) (CorpusInfo, error) {
	tok := opts.Tokenizer
	if tok == nil {
		tok = byteLevel{}
	}
	text, err := opts.TextOptions.withDefaults()
	if err != nil {
		return CorpusInfo{}, fmt.Errorf("tokenize: %w", err)
	}
	if len(paths) == 0 {
		return CorpusInfo{}, errors.New("tokenize: no text file or directory named")
	}
	var roots []string
	var files []textFile
	seen := map[string]string{}
	for _, path := range paths {
		root, list, err := listTextFiles(path, "")
		if err != nil {
			return CorpusInfo{}, fmt.Errorf("tokenize: %w", err)
		}
		for _, f := range list {
			if first, ok := seen[f.path]; ok {
				return CorpusInfo{}, fmt.Errorf("tokenize: %s is both in %s and in %s: name each file once", f.path, first, root)
			}
			seen[f.path] = root
		}
		roots = append(roots, root)
		files = append(files, list...)
	}
	parts, info, err := planText(strings.Join(roots, string(filepath.ListSeparator)), files, text)
	if err != nil {
		return info, fmt.Errorf("tokenize: %w", err)
	}
	info.Tokenizer, info.Vocab = tok.Name(), tok.Vocab()
	total, done := info.TrainBytes+info.ValBytes, int64(0)
	if opts.Progress != nil {
		opts.Progress(0, total)
	}
	err = encodeParts(parts, tok, opts.Workers, opts.Verify, func(p textPart, tokens []int32) error {
		if p.val {
			info.ValTokens += int64(len(tokens))
		} else {
			info.TrainTokens += int64(len(tokens))
		}
		if err := emit(p.val, tokens); err != nil {
			return err
		}
		done += p.size
		if opts.Progress != nil {
			opts.Progress(done, total)
		}
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("tokenize: %w", err)
	}
	return info, nil
}

// encodedPart is a part's tokens, EOT first when the part starts a
// document and the tokenizer has one.
type encodedPart struct {
	tokens []int32
	err    error
}

// encodeParts reads and encodes the parts on workers goroutines (0 means
// GOMAXPROCS) and calls emit with each part's tokens in the parts' order,
// so the result does not depend on the number of workers. With verify,
// each worker also decodes the tokens and compares them with the text.
// Only a few parts per worker are in memory at once. The first error, from
// a worker or from emit, stops the work and is returned.
func encodeParts(parts []textPart, tok Tokenizer, workers int, verify bool, emit func(p textPart, tokens []int32) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	results := make([]chan encodedPart, len(parts))
	for i := range results {
		results[i] = make(chan encodedPart, 1)
	}
	window := make(chan struct{}, 4*workers) // parts read but not yet emitted
	jobs := make(chan int)
	done := make(chan struct{})
	go func() {
		defer close(jobs)
		for i := range parts {
			select {
			case window <- struct{}{}:
			case <-done:
				return
			}
			select {
			case jobs <- i:
			case <-done:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				results[i] <- encodePart(parts[i], tok, verify)
			}
		}()
	}
	err := func() error {
		for i, p := range parts {
			r := <-results[i]
			<-window
			if r.err != nil {
				return r.err
			}
			if err := emit(p, r.tokens); err != nil {
				return err
			}
		}
		return nil
	}()
	close(done)
	wg.Wait()
	return err
}

// encodePart reads and encodes one part.
func encodePart(p textPart, tok Tokenizer, verify bool) encodedPart {
	text, err := readPart(p)
	if err != nil {
		return encodedPart{err: err}
	}
	body := tok.Encode(text)
	tokens := body
	if eot, ok := tok.EOT(); ok && !p.cont {
		tokens = make([]int32, 0, len(body)+1)
		tokens = append(append(tokens, eot), body...)
	}
	if verify {
		back, err := tok.Decode(body)
		if err != nil || back != text {
			return encodedPart{err: fmt.Errorf("%s tokenizer: %s: decode(encode(text)) differs from the text (%d bytes from byte %d, %d tokens, %v)",
				tok.Name(), p.path, p.size, p.offset, len(body), err)}
		}
	}
	return encodedPart{tokens: tokens}
}
