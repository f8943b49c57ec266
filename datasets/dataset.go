// Package datasets holds symddp's data: the Dataset interface, the IDX reader
// for MNIST and Fashion-MNIST, a synthetic learnable dataset, token datasets
// for language models, and the ShardSampler that gives each PE its disjoint
// shard of every global batch.
//
// # Getting data
//
// A [Dataset] is a labelled classification dataset held in memory, read
// through one method, Gather, that copies chosen samples into a batch. Every
// PE holds the whole dataset and gathers only its shard. Datasets come from:
//
//   - [Load]("fashion-mnist" or "mnist", dir): the IDX files, by default
//     where Debian's packages install them. A missing file is a
//     [*NotInstalledError] whose Hint says how to get it; [CheckInstalled]
//     asks without reading. Pixels are in [0, 1]; standardise them with
//     [PixelStats] and [InMemory.Normalize].
//   - [LoadBytes]: the same files with the pixels kept as bytes
//     ([ByteSamples], standardised by [ByteSamples.Normalize] as Gather
//     copies them out: a quarter of the memory, the same values). Raw files
//     are memory-mapped, so the processes of a host share one copy;
//     [Unpack] writes raw files from gzip ones (the train command does it
//     once per job in the job's run directory).
//   - [Synthetic] and [SyntheticSplit]: Gaussian classes that any model
//     learns, for tests and machines without the data.
//   - [NewInMemory]: samples and labels a program already holds in two flat
//     slices.
//   - a type of your own: anything with Len, SampleShape, Classes and Gather
//     (examples/customdata generates spirals this way).
//
// [InMemory] adds Subset and Split for short runs and held-out sets.
//
// # Token data
//
// The trainer reads any [Source]; [AsSource] makes one of a Dataset. A
// [TokenSource] is a Source of language-model windows: T input tokens and,
// as targets, the next token at each position; window i of a stream starts
// at token i·T. Token sources come from:
//
//   - [LoadText](path, T, opts): byte-level text (vocabulary 256) of a file
//     or a directory read recursively in sorted order, binary files skipped;
//     one text file in [TextOptions].ValEvery (20) is validation data. With
//     no path, Go's own source tree ([DefaultTextDir], ~100 MiB), which
//     every machine that builds symddp has. With [TextOptions].Tokenizer
//     (NewTokenizer("gpt2"): GPT-2's BPE, vocabulary 50257, built in, no
//     download) the windows are of its tokens, each file a document led by
//     <|endoftext|>.
//   - [BuildCorpus] and [LoadCorpus]: the same text written once per job into
//     one file in the run directory, then memory-mapped by every PE, so a
//     host holds one copy. BuildCorpus rebuilds a stale file and does
//     nothing (a listing of the tree, ~50 ms for Go's) when it is current.
//   - [LoadShards](trainGlob, valGlob, T, vocab): llm.c's uint16 and uint32
//     token shards, memory-mapped, headers and tokens checked at load.
//     [TokenizeText] encodes text files in parallel and [ShardWriter]
//     writes such shards (the tokenize command is the two together).
//   - [NewTokenSource]: token streams a program already holds.
//   - [NewSyntheticTokens] and [SyntheticTokenSplit]: windows of one
//     pseudo-random stream over any vocabulary, computed as they are
//     gathered (no memory, no file), for measuring speed: nothing in them
//     can be learnt.
//
// [DecodeBytes] and [QuoteBytes] print byte-level tokens; a [Tokenizer]
// decodes the tokens it made; [BitsPerByte] turns a byte-level loss in nats
// into bits per byte.
//
// # Shards and batches
//
// ddp.Trainer shards the data itself. A training loop of your own would do
// as it does: a [ShardSampler] names the rows of each PE at every step of an
// epoch, following docs/DESIGN.md (the global batches depend on the seed,
// not on the PE count; padding rows are -1), and a [Batcher] gathers them
// into preallocated buffers. [NewEvalSampler] shards a test set in order.
package datasets

// Dataset is a labelled classification dataset held in memory.
type Dataset interface {
	// Len is the number of samples.
	Len() int
	// SampleShape is the shape of one sample ([784] for flattened 28x28).
	SampleShape() []int
	// Classes is the number of classes; labels are 0..Classes()-1.
	Classes() int
	// Gather copies samples idx[i] into x[i*size:(i+1)*size] and their
	// labels into y[i], where size is the product of SampleShape. An index
	// of -1 is padding: x's row is zeroed and y[i] = -1. It does not allocate.
	Gather(idx []int, x []float32, y []int32)
}
