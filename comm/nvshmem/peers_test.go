package nvshmem

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestPeerWatch(t *testing.T) {
	dir := t.TempDir()
	var w peerWatch
	w.init(bootstrap{pe: 0, npes: 3, runDir: dir})
	if data, err := os.ReadFile(pidFile(dir, 0)); err != nil || string(data) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("own pid file: %q, %v", data, err)
	}
	if pe, how := w.gone(); pe != -1 {
		t.Fatalf("no peer files yet, but PE %d %s", pe, how)
	}
	// PE 1 is this process (alive); PE 2 a process that has ended.
	if err := os.WriteFile(pidFile(dir, 1), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	if pe, how := w.gone(); pe != -1 {
		t.Fatalf("live peer reported: PE %d %s", pe, how)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("cannot run true:", err)
	}
	dead := cmd.Process.Pid
	if err := os.WriteFile(pidFile(dir, 2), []byte(strconv.Itoa(dead)), 0o644); err != nil {
		t.Fatal(err)
	}
	pe, how := w.gone()
	if pe != 2 || !strings.Contains(how, "has exited") || !strings.Contains(how, strconv.Itoa(dead)) {
		t.Fatalf("ended peer: PE %d %q, want PE 2 with pid %d", pe, how, dead)
	}
	// A peer that removes its file (closed) after it was seen is reported too.
	os.Remove(pidFile(dir, 2))
	os.Remove(pidFile(dir, 1))
	if pe, how := w.gone(); pe != 1 || !strings.Contains(how, "closed") {
		t.Fatalf("closed peer: PE %d %q, want PE 1 closed", pe, how)
	}
	w.close()
	if _, err := os.Stat(pidFile(dir, 0)); !os.IsNotExist(err) {
		t.Fatalf("own pid file left after close: %v", err)
	}
}
