package hostilesuite

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What the suite reads of a process, from /proc. CPU is utime+stime of
// /proc/PID/stat in clock ticks (USER_HZ, 100 on Linux: 10 ms each).

const clockTick = 10 * time.Millisecond

// rssMB is VmRSS of pid.
func rssMB(pid int) float64 { return statusKB(pid, "VmRSS:") / 1024 }

// hwmMB is VmHWM of pid: the peak RSS since it was last reset.
func hwmMB(pid int) float64 { return statusKB(pid, "VmHWM:") / 1024 }

// resetPeak resets pid's VmHWM (clear_refs 5, Linux 4.0+); false when the
// kernel refuses, and then only the sampled peak counts.
func resetPeak(pid int) bool {
	return os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0) == nil
}

func statusKB(pid int, field string) float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, _ := strconv.ParseFloat(f[0], 64)
				return v
			}
		}
	}
	return 0
}

// cpu is pid's user+system CPU time.
func cpu(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	// After the command: state is field 3, utime 14, stime 15.
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * clockTick
}

// fds is how many descriptors pid holds.
func fds(pid int) int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// sampler follows the RSS and descriptors of some processes until stopped.
type sampler struct {
	pids []int
	stop chan struct{}
	done chan struct{}

	hwm []bool // VmHWM was reset, so it is this window's peak

	mu      sync.Mutex
	peakRSS []float64
	peakFDs []int
}

// sampleEvery is the sampling period; VmHWM catches what falls between.
const sampleEvery = 5 * time.Millisecond

func startSampler(pids ...int) *sampler {
	s := &sampler{pids: pids, stop: make(chan struct{}), done: make(chan struct{}),
		peakRSS: make([]float64, len(pids)), peakFDs: make([]int, len(pids))}
	for _, pid := range pids {
		s.hwm = append(s.hwm, resetPeak(pid))
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for n := 0; ; n++ {
			s.sample(n%4 == 0)
			select {
			case <-s.stop:
				s.sample(true)
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) sample(withFDs bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, pid := range s.pids {
		s.peakRSS[i] = max(s.peakRSS[i], rssMB(pid))
		if s.hwm[i] {
			s.peakRSS[i] = max(s.peakRSS[i], hwmMB(pid))
		}
		if withFDs {
			s.peakFDs[i] = max(s.peakFDs[i], fds(pid))
		}
	}
}

// finish stops s and returns each process's peak RSS (MB) and descriptors.
func (s *sampler) finish() ([]float64, []int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]float64(nil), s.peakRSS...), append([]int(nil), s.peakFDs...)
}
