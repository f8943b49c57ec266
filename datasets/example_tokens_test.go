package datasets_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/symddp/symddp/datasets"
)

// Example_textCorpus shows the token path of the train command: the
// launcher builds the corpus once per job in the run directory, every PE
// maps it, and each step gathers the windows its ShardSampler names.
func Example_textCorpus() {
	src, _ := os.MkdirTemp("", "text")
	run, _ := os.MkdirTemp("", "run")
	defer os.RemoveAll(src)
	defer os.RemoveAll(run)
	os.WriteFile(filepath.Join(src, "poem.txt"), []byte(strings.Repeat("the quick brown fox\n", 10)), 0o644)

	// Once per job, before the PEs start ("" would mean Go's source tree).
	corpus := filepath.Join(run, datasets.CorpusFile)
	info, err := datasets.BuildCorpus(corpus, src, datasets.TextOptions{ValEvery: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d files, %d training and %d validation bytes; validation: %s\n",
		info.Files, info.TrainBytes, info.ValBytes, info.Split)

	// In every PE: windows of 8 bytes, and the next byte as each target.
	const context, pes, pe = 8, 2, 1
	train, val, err := datasets.LoadCorpus(corpus, context)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer train.Close()
	defer val.Close()
	s, _ := datasets.NewShardSampler(train.Len(), 4, pes, pe, 7)
	idx := make([]int, s.LocalBatch())
	b := datasets.Batch{Tokens: make([]int32, len(idx)*context), Y: make([]int32, len(idx)*context)}
	s.Batch(0, 0, idx)
	train.GatherBatch(idx, b)
	fmt.Printf("%d windows; PE %d, step 0, window %d: %s -> %s\n", train.Len(), pe, idx[0],
		datasets.QuoteBytes(b.Tokens[:context]), datasets.QuoteBytes(b.Y[:context]))
	fmt.Printf("a loss of 0.69 nats is %.2f bits per byte\n", datasets.BitsPerByte(0.69))
	// Output:
	// 1 files, 180 training and 20 validation bytes; validation: the last 1/10 of the bytes (fewer than 10 text files)
	// 22 windows; PE 1, step 0, window 6: "k brown " -> " brown f"
	// a loss of 0.69 nats is 1.00 bits per byte
}
