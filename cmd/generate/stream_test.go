package main

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/internal/stopsignal"
	"github.com/symddp/symddp/models"
)

// pieces records each write.
type pieces []string

func (p *pieces) Write(b []byte) (int, error) {
	*p = append(*p, string(b))
	return len(b), nil
}

// The streamer writes each token's text as it comes, holds a character
// whose bytes span tokens until its last byte, and ends with what the
// whole sample decodes to: an unfinished character escaped, as display
// writes it.
func TestStreamerWritesWholeCharacters(t *testing.T) {
	tok, err := datasets.NewTokenizer(datasets.ByteTokenizer)
	require.NoError(t, err)
	var w pieces
	s := &streamer{w: &w, tok: tok}
	steps := []struct {
		token int32
		seen  string // all written after the token
	}{
		{'a', "a"},
		{0xc3, "a"}, // é's first byte: held
		{0xa9, "aé"},
		{0xe2, "aé"}, // → (e2 86 92): held for two more bytes
		{0x86, "aé"},
		{0x92, "aé→"},
		{0xc3, "aé→"},
		{'b', "aé→\\xc3b"}, // can never be a character: escaped, as at the end
		{0x80, "aé→\\xc3b\\x80"},
		{0xf0, "aé→\\xc3b\\x80"},
	}
	var all []int32
	for _, st := range steps {
		s.emit(st.token)
		all = append(all, st.token)
		assert.Equal(t, st.seen, strings.Join(w, ""), "after %#x", st.token)
	}
	require.NoError(t, s.finish())
	whole, err := display(tok, all)
	require.NoError(t, err)
	assert.Equal(t, whole+"\n", strings.Join(w, ""), "the stream is the whole sample's text")
	assert.Equal(t, len(steps), s.n)

	var ids pieces
	s = &streamer{w: &ids}
	for _, tk := range []int32{5, 17, 256} {
		s.emit(tk)
	}
	require.NoError(t, s.finish())
	assert.Equal(t, []string{"5", ",17", ",256", "\n"}, []string(ids))
}

// generate prints the sample as it is drawn (more writes than the prompt
// and the line's end), the same text as before it streamed; a signal stops
// it between two tokens with what was drawn on the screen and 128 + the
// signal.
func TestGenerateStreamsAndStops(t *testing.T) {
	text := []byte(strings.Repeat("hello, world\n", 200))
	train, err := datasets.NewTokenSource([][]byte{text}, 8, 256)
	require.NoError(t, err)
	dir := trainCheckpoint(t, "gpt", models.Config{Layers: 1, Heads: 2, Width: 16, Context: 8}, train)

	var out, errb pieces
	rc := run(context.Background(), []string{"--checkpoint", dir, "--prompt", "hello", "--max-tokens", "12", "--temperature", "0"}, &out, &errb)
	require.Equal(t, 0, rc, errb)
	_, whole, _ := runGenerate("--checkpoint", dir, "--prompt", "hello", "--max-tokens", "12", "--temperature", "0")
	assert.Equal(t, whole, strings.Join(out, ""))
	assert.Greater(t, len(out), 3, "written as it was drawn: %q", out)
	assert.Equal(t, "hello", out[0], "the prompt before the first token")

	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(stopsignal.Stop{Signal: syscall.SIGINT})
	rc, stdout, stderr := runGenerateCtx(ctx, "--checkpoint", dir, "--prompt", "hello", "--max-tokens", "12")
	assert.Equal(t, 130, rc)
	assert.Equal(t, "hello\n", stdout)
	assert.Equal(t, "generate: stopped by SIGINT after 0 of 12 tokens\n", stderr)
}
