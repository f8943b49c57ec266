package ddp

// Test hooks into the package's internals.

// SetCheckpointBytesHook makes the checkpoint writer call f as it writes.
func SetCheckpointBytesHook(f func(written int64)) { checkpointBytesHook = f }

// ParseSafetensors exposes the checkpoint parser to fuzz tests.
func ParseSafetensors(b []byte) error {
	_, err := parseSafetensors(b)
	return err
}

// CodeText is codeText, for the external tests.
var CodeText = codeText

// GPTSetup is gptSetup, for the external tests.
var GPTSetup = gptSetup

// HashFloat32s is the replica check's hash, for the external tests.
var HashFloat32s = hashFloat32s

// WriteTestCheckpoint is writeTestCheckpoint, for the external tests.
var WriteTestCheckpoint = writeTestCheckpoint

// SetStateReadHook makes PE 0 call f before it reads optimizer state slot
// k of the checkpoint at path it resumes from.
func SetStateReadHook(f func(path string, k int)) { stateReadHook = f }
