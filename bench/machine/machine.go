// Package machine reads what the benchmarks report about the machine they ran on and the CPU
// spent while they ran: the CPU seconds of every core (/proc/stat), of this process (its
// rusage) and of another process (/proc/<pid>/stat), the load average (/proc/loadavg), and a
// CPU profile of this process. It also rounds the figures of the reports. Every reader
// returns zeros when the file cannot be read, so a bench on another system reports zeros
// instead of failing.
package machine

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc (100 on every Linux build that
// matters here).
const clockTicks = 100

// Info describes where a bench ran.
type Info struct {
	Cores        int        `json:"cores"`
	GOMAXPROCS   int        `json:"gomaxprocs"`
	GoVersion    string     `json:"goVersion"`
	OS           string     `json:"os"`
	LoadAvgStart [3]float64 `json:"loadAvgStart"`
	LoadAvgEnd   [3]float64 `json:"loadAvgEnd"`
}

// Describe returns the Info of this machine and process, with OS as GOOS/GOARCH and the load
// average at start read now; the bench sets LoadAvgEnd when it ends.
func Describe() Info {
	return Info{
		Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, LoadAvgStart: LoadAverage(),
	}
}

// Sample is one reading of the machine's and this process's CPU counters, in seconds.
type Sample struct {
	// At is when the sample was taken.
	At time.Time
	// Busy and Total are the seconds of every core since boot, not idle and in all.
	Busy, Total float64
	// Self is this process's user + system seconds.
	Self float64
}

// Read takes a Sample now.
func Read() Sample {
	s := Sample{At: time.Now()}
	s.Busy, s.Total = CoreSeconds()
	s.Self = SelfCPU()
	return s
}

// WallSeconds returns the seconds from before to s.
func (s Sample) WallSeconds(before Sample) float64 { return s.At.Sub(before.At).Seconds() }

// BusySeconds returns the busy seconds of every core from before to s.
func (s Sample) BusySeconds(before Sample) float64 { return s.Busy - before.Busy }

// SelfSeconds returns the CPU seconds this process spent from before to s.
func (s Sample) SelfSeconds(before Sample) float64 { return s.Self - before.Self }

// BusyPct returns the busy share of all cores from before to s, in percent rounded to one
// digit, or 0 when no time passed.
func (s Sample) BusyPct(before Sample) float64 {
	if total := s.Total - before.Total; total > 0 {
		return Round(100*(s.Busy-before.Busy)/total, 1)
	}
	return 0
}

// CoreSeconds returns the seconds of every core since boot that were not idle (busy) and in
// all (total), from the first line of /proc/stat; guest time is already in user, idle and
// iowait count as idle. It returns zeros when /proc/stat cannot be read.
func CoreSeconds() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) == 0 {
		return 0, 0
	}
	var idle float64
	// user nice system idle iowait irq softirq steal
	for i, v := range f[1:min(len(f), 9)] {
		n, _ := strconv.ParseFloat(v, 64)
		total += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return (total - idle) / clockTicks, total / clockTicks
}

// SelfCPU returns this process's user + system seconds, or 0 when they cannot be read.
func SelfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return seconds(ru.Utime) + seconds(ru.Stime)
}

func seconds(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// ProcessCPU returns the user + system seconds of the process pid, from /proc/<pid>/stat, or
// 0 when it cannot be read (the process ended, or there is no /proc).
func ProcessCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	// The command name is in parentheses and may hold spaces; the fields follow the last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks
}

// LoadAverage returns the 1, 5 and 15 minute load averages, or zeros when /proc/loadavg
// cannot be read.
func LoadAverage() [3]float64 {
	var la [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return la
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		la[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return la
}

// Round rounds v to digits decimal digits, halves away from zero; NaN and the infinities,
// which JSON cannot hold, become 0.
func Round(v float64, digits int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// StartCPUProfile starts a CPU profile of this process into the file path; the function it
// returns stops the profile and closes the file. Beside it, the allocation profile of the
// process is written at the start (path + ".allocs-start") and at the stop (path +
// ".allocs"), so that `go tool pprof -sample_index=alloc_space -diff_base=<start> <stop>`
// shows what was allocated during the profiled span.
func StartCPUProfile(path string) (stop func(), err error) {
	writeAllocs(path + ".allocs-start")
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting the CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		writeAllocs(path + ".allocs")
	}, nil
}

// writeAllocs writes the process's allocation profile to path; a failure only loses the
// profile.
func writeAllocs(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("allocs").WriteTo(f, 0)
}

// Median returns the median of vs (the mean of the middle two of an even count), 0 for none.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
