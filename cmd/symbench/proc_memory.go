package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/symddp/symddp/internal/settings"
)

// peMemory is what /proc says about one PE process's memory, in bytes.
type peMemory struct {
	HWM    int64 `json:"vm_hwm"`    // VmHWM: peak resident set
	RSS    int64 `json:"vm_rss"`    // VmRSS at the sample with the largest PSS
	Anon   int64 `json:"rss_anon"`  // RssAnon: private anonymous pages (Go heap, stacks, BLAS buffers)
	File   int64 `json:"rss_file"`  // RssFile: mapped files (the binary, libraries, the mapped dataset)
	Shmem  int64 `json:"rss_shmem"` // RssShmem: shared memory (the symmetric heap)
	PSS    int64 `json:"pss"`       // Pss: resident pages, each shared page divided among its mappers
	Sample int   `json:"samples"`   // how many samples were taken
}

// readStatus parses the memory lines of /proc/<pid>/status.
func readStatus(pid int) (peMemory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return peMemory{}, err
	}
	var m peMemory
	fields := map[string]*int64{"VmHWM": &m.HWM, "VmRSS": &m.RSS, "RssAnon": &m.Anon, "RssFile": &m.File, "RssShmem": &m.Shmem}
	parseKB(b, fields)
	return m, nil
}

// readPSS reads "Pss:" of /proc/<pid>/smaps_rollup.
func readPSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	var pss int64
	parseKB(b, map[string]*int64{"Pss": &pss})
	return pss, nil
}

// parseKB fills fields from "Name:   1234 kB" lines, in bytes.
func parseKB(b []byte, fields map[string]*int64) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		p, want := fields[name]
		if !ok || !want {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			*p = kb << 10
		}
	}
}

// peOf returns the PE number of process pid from its SYMDDP_PE variable, or
// -1 when it has none.
func peOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return -1
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(settings.PEName+"=")); ok {
			if n, err := strconv.Atoi(string(v)); err == nil {
				return n
			}
		}
	}
	return -1
}

// childrenOf lists the children of pid (all its threads').
func childrenOf(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// memSampler samples the memory of a job's PE processes: the children of
// the launcher that carry SYMDDP_PE, or the launcher itself when it has no
// such children (one PE runs in the launcher).
type memSampler struct {
	launcher int
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	byPE     map[int]peMemory
}

func startMemSampler(launcher int, every time.Duration) *memSampler {
	s := &memSampler{launcher: launcher, stop: make(chan struct{}), done: make(chan struct{}), byPE: map[int]peMemory{}}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// sample reads every PE once. The launcher counts as PE 0 only while it has
// no PE children.
func (s *memSampler) sample() {
	pids := map[int]int{}
	for _, c := range childrenOf(s.launcher) {
		if pe := peOf(c); pe >= 0 {
			pids[pe] = c
		}
	}
	if len(pids) == 0 {
		pids[0] = s.launcher
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for pe, pid := range pids {
		m, err := readStatus(pid)
		if err != nil || m.HWM == 0 {
			continue // exited meanwhile
		}
		pss, err := readPSS(pid)
		if err != nil {
			continue
		}
		m.PSS = pss
		old := s.byPE[pe]
		m.Sample = old.Sample + 1
		if m.PSS < old.PSS { // keep the components of the largest PSS seen
			m.RSS, m.Anon, m.File, m.Shmem, m.PSS = old.RSS, old.Anon, old.File, old.Shmem, old.PSS
		}
		m.HWM = max(m.HWM, old.HWM)
		s.byPE[pe] = m
	}
}

// finish stops sampling and returns the memory of every PE seen.
func (s *memSampler) finish() map[int]peMemory {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byPE
}

// hostWork is the host's CPU time at a start (cpuBusy), to tell how many
// CPUs other processes kept busy from then on.
type hostWork struct {
	busy, total int64
	err         error
}

func startHostWork() hostWork {
	b, t, err := cpuBusy()
	return hostWork{b, t, err}
}

// otherCPUs is the CPUs that processes other than ours (own CPU seconds)
// kept busy on average over the wall seconds since w; false when
// /proc/stat cannot tell.
func (w hostWork) otherCPUs(own, wall float64) (float64, bool) {
	busy, total, err := cpuBusy()
	if err != nil || w.err != nil || total <= w.total || wall <= 0 {
		return 0, false
	}
	const hz = 100 // USER_HZ
	return max(0, (float64(busy-w.busy)/hz-own)/wall), true
}

// cpuBusy returns the busy and total CPU time of the host since boot from
// /proc/stat, in clock ticks (USER_HZ, 100 per second on Linux).
func cpuBusy() (busy, total int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, s := range f[1:] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		if i >= 8 { // guest time is already counted in user
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}

// loadAverage is the 1-minute load average.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
