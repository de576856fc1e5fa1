package inboxbench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc.
const clockTicks = 100

// cpuSample is one reading of the CPU counters that the bench reports per phase.
type cpuSample struct {
	at           time.Time
	machineBusy  float64 // seconds of every core not idle, since boot
	machineTotal float64
	self         float64 // this process (QueueBox), user + system seconds
	loadgen      float64 // the load generator process
	backends     map[int]float64
}

// CPUUse is the CPU time spent during one phase, in seconds, split by who spent it. Other is
// what is left of the machine's busy time after the bench's three parties: the WAL writer,
// the checkpointer and other users of this shared machine.
type CPUUse struct {
	WallSeconds    float64 `json:"wallSeconds"`
	MachineBusyPct float64 `json:"machineBusyPct"` // of all cores
	QueueBox       float64 `json:"queueBoxSeconds"`
	LoadGenerator  float64 `json:"loadGeneratorSeconds"`
	PostgresOurs   float64 `json:"postgresBackendsSeconds"`
	Other          float64 `json:"otherSeconds"`
	// Per request, in microseconds of CPU.
	QueueBoxUsPerRequest float64 `json:"queueBoxUsPerRequest"`
	PostgresUsPerRequest float64 `json:"postgresUsPerRequest"`
	LoadGenUsPerRequest  float64 `json:"loadGeneratorUsPerRequest"`
}

func readCPU(loadgenPID int, backends map[int]float64) cpuSample {
	s := cpuSample{at: time.Now(), backends: backends}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		var total, idle float64
		// user nice system idle iowait irq softirq steal; guest time is already in user.
		for i, v := range f[1:min(len(f), 9)] {
			n, _ := strconv.ParseFloat(v, 64)
			total += n
			if i == 3 || i == 4 { // idle, iowait
				idle += n
			}
		}
		s.machineTotal = total / clockTicks
		s.machineBusy = (total - idle) / clockTicks
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = tv(ru.Utime) + tv(ru.Stime)
	}
	if loadgenPID > 0 {
		s.loadgen = processCPU(loadgenPID)
	}
	return s
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// processCPU returns the user + system seconds of a process, or 0 when it cannot be read.
func processCPU(pid int) float64 {
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

// cpuBetween computes the use between two samples for a phase that answered requests.
func cpuBetween(a, b cpuSample, requests int) CPUUse {
	busy := b.machineBusy - a.machineBusy
	total := b.machineTotal - a.machineTotal
	var backends float64
	for pid, after := range b.backends {
		backends += after - a.backends[pid] // a backend opened during the phase counts whole
	}
	u := CPUUse{
		WallSeconds:   round(b.at.Sub(a.at).Seconds(), 2),
		QueueBox:      round(b.self-a.self, 2),
		LoadGenerator: round(b.loadgen-a.loadgen, 2),
		PostgresOurs:  round(backends, 2),
	}
	if total > 0 {
		u.MachineBusyPct = round(100*busy/total, 1)
	}
	u.Other = round(max(0, busy-u.QueueBox-u.LoadGenerator-u.PostgresOurs), 2)
	if requests > 0 {
		u.QueueBoxUsPerRequest = round(1e6*u.QueueBox/float64(requests), 1)
		u.PostgresUsPerRequest = round(1e6*u.PostgresOurs/float64(requests), 1)
		u.LoadGenUsPerRequest = round(1e6*u.LoadGenerator/float64(requests), 1)
	}
	return u
}

// loadAverage returns the 1, 5 and 15 minute load averages.
func loadAverage() [3]float64 {
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

func round(v float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "inboxbench: "+format+"\n", args...)
}
