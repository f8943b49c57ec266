package datasets

import (
	"encoding/binary"
	"fmt"
	"io"
)

// tokenCorpusVersion goes into the fingerprint of a corpus of tokens: a new
// layout or a new way to encode rebuilds old files.
const tokenCorpusVersion = 1

// tokenWidth is the bytes of one token of a vocabulary in a corpus file or
// a shard: 2 up to 65536 tokens, else 4.
func tokenWidth(vocab int) int {
	if vocab <= 1<<16 {
		return 2
	}
	return 4
}

// appendTokensLE appends tokens to b as little-endian integers of width
// bytes.
func appendTokensLE(b []byte, tokens []int32, width int) []byte {
	for _, t := range tokens {
		if width == 2 {
			b = binary.LittleEndian.AppendUint16(b, uint16(t))
		} else {
			b = binary.LittleEndian.AppendUint32(b, uint32(t))
		}
	}
	return b
}

// writeTokenCorpus encodes the text files with opts.Tokenizer into a
// temporary file beside dst and renames it to dst: the training tokens are
// written as they come, the validation tokens (a twentieth by default) are
// held until the end.
func writeTokenCorpus(dst, root string, files []textFile, opts TextOptions) (CorpusInfo, error) {
	parts, info, err := planText(root, files, opts)
	if err != nil {
		return info, err
	}
	tok := opts.Tokenizer
	info.Tokenizer, info.Vocab = tok.Name(), tok.Vocab()
	width := tokenWidth(info.Vocab)
	return writeCorpusFile(dst, func(w io.Writer) (CorpusInfo, error) {
		var val, buf []byte
		err := encodeParts(parts, tok, 0, false, func(p textPart, tokens []int32) error {
			if p.val {
				info.ValTokens += int64(len(tokens))
				val = appendTokensLE(val, tokens, width)
				return nil
			}
			info.TrainTokens += int64(len(tokens))
			buf = appendTokensLE(buf[:0], tokens, width)
			if _, err := w.Write(buf); err != nil {
				return fmt.Errorf("write %s: %w", dst, err)
			}
			return nil
		})
		if err != nil {
			return info, err
		}
		if _, err := w.Write(val); err != nil {
			return info, fmt.Errorf("write %s: %w", dst, err)
		}
		return info, nil
	})
}

// checkTokenCorpusSize checks the header of a corpus of tokens against the
// size of its file.
func checkTokenCorpusSize(info CorpusInfo, size int64) error {
	if info.Vocab <= 0 {
		return fmt.Errorf("header declares a vocabulary of %d tokens for tokenizer %q", info.Vocab, info.Tokenizer)
	}
	w := int64(tokenWidth(info.Vocab))
	if info.TrainTokens < 0 || info.ValTokens < 0 || corpusHeaderBytes+w*(info.TrainTokens+info.ValTokens) != size {
		return fmt.Errorf("header declares %d training and %d validation tokens of %d bytes but the file holds %d bytes after the header (truncated?)",
			info.TrainTokens, info.ValTokens, w, size-corpusHeaderBytes)
	}
	return nil
}

// tokenCorpusSources returns the windows of the two parts of a corpus of
// tokens held whole, header included, in trainData and valData (two
// mappings of one file).
func tokenCorpusSources(name string, info CorpusInfo, trainData, valData []byte, context int) (train, val *TokenSource, err error) {
	w := int64(tokenWidth(info.Vocab))
	cut := corpusHeaderBytes + w*info.TrainTokens
	return tokenTextSources(name, info, tokenSegmentOf(trainData[corpusHeaderBytes:cut:cut], w), tokenSegmentOf(valData[cut:], w), context)
}

// tokenSegmentOf views little-endian tokens of width w as a segment.
func tokenSegmentOf(body []byte, w int64) tokenSegment {
	if w == 2 {
		return tokenSegment{u16: shardTokens[uint16](body, binary.LittleEndian.Uint16)}
	}
	return tokenSegment{u32: shardTokens[uint32](body, binary.LittleEndian.Uint32)}
}

// tokenTextSources returns the windows of the two parts of a corpus of
// tokens.
func tokenTextSources(name string, info CorpusInfo, trainTokens, valTokens tokenSegment, context int) (train, val *TokenSource, err error) {
	if train, err = newTokenSource([]tokenSegment{trainTokens}, context, info.Vocab); err != nil {
		return nil, nil, fmt.Errorf("load text %s: training part (%d files, %d %s tokens): %w", name, info.TrainFiles, trainTokens.len(), info.Tokenizer, err)
	}
	if val, err = newTokenSource([]tokenSegment{valTokens}, context, info.Vocab); err != nil {
		return nil, nil, fmt.Errorf("load text %s: validation part (%d files, %d %s tokens): %w", name, info.ValFiles, valTokens.len(), info.Tokenizer, err)
	}
	return train, val, nil
}

// loadTokenText is LoadText with a tokenizer: the parts encoded into memory.
func loadTokenText(root string, files []textFile, context int, opts TextOptions) (train, val *TokenSource, err error) {
	parts, info, err := planText(root, files, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("load text: %w", err)
	}
	tok := opts.Tokenizer
	info.Tokenizer, info.Vocab = tok.Name(), tok.Vocab()
	w := int64(tokenWidth(info.Vocab))
	var trainBytes, valBytes []byte
	err = encodeParts(parts, tok, 0, false, func(p textPart, tokens []int32) error {
		if p.val {
			valBytes = appendTokensLE(valBytes, tokens, int(w))
		} else {
			trainBytes = appendTokensLE(trainBytes, tokens, int(w))
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("load text: %w", err)
	}
	return tokenTextSources(root, info, tokenSegmentOf(trainBytes, w), tokenSegmentOf(valBytes, w), context)
}
