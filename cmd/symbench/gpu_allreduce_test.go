package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestParseGPUResults(t *testing.T) {
	out := strings.Join([]string{
		"[pe 0] gpuinfo NVIDIA H200, 132 SMs",
		"[pe 0] gpuresult barrier 0 1000 4.5e-06",
		"[pe 0] gpuresult two-shot 1073741824 40 0.0005",
		"[pe 1] gpuresult two-shot 1 1 1", // only PE 0's lines count
		"gpuresult copy 1073741824 40 0.0004",
		"noise",
	}, "\n")
	info, res, err := parseGPUResults(out)
	if err != nil {
		t.Fatal(err)
	}
	if info != "NVIDIA H200, 132 SMs" || len(res) != 3 {
		t.Fatalf("info %q, results %+v", info, res)
	}
	if r := res[1]; r.what != "two-shot" || r.bytes != 1<<30 || r.iters != 40 || r.seconds != 0.0005 {
		t.Fatalf("second result %+v", r)
	}
	if _, _, err := parseGPUResults("nothing here"); err == nil {
		t.Fatal("no results accepted")
	}
}

func TestGPUTableOnePE(t *testing.T) {
	o, err := parseGPUFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	res := []gpuResult{
		{what: "barrier", iters: 1000, seconds: 4.5e-6},
		{what: "two-shot", bytes: 1 << 30, iters: 40, seconds: 0.0005},
		{what: "copy", bytes: 1 << 30, iters: 40, seconds: 0.0004},
	}
	var b bytes.Buffer
	if err := printGPUTable(&b, o, 1, "a GPU", res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// 2 GiB moved in 0.5 ms is 4.29 TB/s: 100% of the 4.3 TB/s peak, 80% of the copy (5.37 TB/s).
	for _, want := range []string{"barrier of 1 PE(s): 4.5 µs", "1 GiB", "two-shot", "4.29 TB/s", "80%", "100%", "5.37 TB/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestGPUTableSeveralPEs(t *testing.T) {
	o, err := parseGPUFlags([]string{"--pes", "4", "--nvshmem"})
	if err != nil {
		t.Fatal(err)
	}
	res := []gpuResult{
		{what: "auto", bytes: 1 << 20, iters: 100, seconds: 20e-6},
		{what: "nvshmem", bytes: 1 << 20, iters: 10, seconds: 1e-3},
	}
	var b bytes.Buffer
	if err := printGPUTable(&b, o, 4, "a GPU", res); err != nil {
		t.Fatal(err)
	}
	// 2·4·1 MiB in 20 µs is 419.4 GB/s, a busbw of 1 MiB·2·3/4 / 20 µs =
	// 78.6 GB/s; NVSHMEM takes 50 times as long.
	for _, want := range []string{"aggregate", "419.4 GB/s", "78.6 GB/s", "1.00 ms", "50.0×"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestGPUFlagsRejected(t *testing.T) {
	for _, args := range [][]string{
		{"--algos", "nvshmem"},
		{"--dtype", "f16"},
		{"--min", "8B"},
		{"--pes", "0"},
	} {
		if _, err := parseGPUFlags(args); err == nil {
			t.Errorf("flags %q accepted", args)
		}
	}
}

// resultLines writes algorithm auto's timings in the NCCL script's form,
// which compareAllReduceResults joins with the script's own lines.
func TestAllReduceResultsSideBySide(t *testing.T) {
	res := []gpuResult{
		{what: "auto", bytes: 1 << 20, iters: 100, seconds: 20e-6},
		{what: "one-shot", bytes: 1 << 20, iters: 100, seconds: 30e-6},
		{what: "auto", bytes: 16 << 20, iters: 10, seconds: 100e-6},
		{what: "nvshmem", bytes: 1 << 20, iters: 10, seconds: 1e-3},
	}
	ours := resultLines(2, res)
	want := "RESULT symddp pes=2 bytes=1048576 time_us=20.00 busbw_gbs=52.429\n" +
		"RESULT symddp pes=2 bytes=16777216 time_us=100.00 busbw_gbs=167.772\n"
	if ours != want {
		t.Fatalf("resultLines:\n%s\nwant\n%s", ours, want)
	}
	theirs := "| table | of the script |\n" +
		"RESULT nccl gpus=2 bytes=1048576 time_us=37.31 busbw_gbs=28.103\n" +
		"RESULT nccl gpus=2 bytes=4194304 time_us=60.00 busbw_gbs=69.905\n" +
		"RESULT nccl gpus=2 bytes=16777216 time_us=77.32 busbw_gbs=216.985\n"
	rows := compareAllReduceResults(ours, theirs)
	wantRows := [][]string{
		{"2", "1 MiB", "20.0 µs", "37.3 µs", "52.4 GB/s", "28.1 GB/s", "1.87×"},
		{"2", "16 MiB", "100.0 µs", "77.3 µs", "167.8 GB/s", "217.0 GB/s", "0.77×"},
	}
	if !slices.EqualFunc(rows, wantRows, slices.Equal) {
		t.Errorf("rows %q,\nwant %q", rows, wantRows)
	}
	if rows := compareAllReduceResults(ours, "no results\n"); len(rows) != 0 {
		t.Errorf("rows without NCCL results: %q", rows)
	}
}
