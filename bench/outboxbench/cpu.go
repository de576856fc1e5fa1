package outboxbench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc (100 on every Linux build that
// matters here).
const clockTicks = 100

// cpuSample is one reading of the CPU counters that the bench reports per run.
type cpuSample struct {
	at           time.Time
	machineBusy  float64 // seconds of every core not idle, since boot
	machineTotal float64
	self         float64 // this process, user + system seconds
	sink         float64 // the helper process
}

// CPUUse is the CPU time spent during one run, in seconds, split by who spent it. Machine is
// every core's busy time, which includes other users of this shared machine; OtherMachine is
// what is left after the bench's three parties.
type CPUUse struct {
	WallSeconds    float64 `json:"wallSeconds"`
	MachineBusyPct float64 `json:"machineBusyPct"` // of all cores
	PollerProcess  float64 `json:"pollerProcessSeconds"`
	Receiver       float64 `json:"receiverSeconds"`
	PostgresOurs   float64 `json:"postgresBackendsSeconds"` // the backends of the bench database
	OtherMachine   float64 `json:"otherSeconds"`            // WAL writer, checkpointer, other users
}

func readCPU(sinkPID int) cpuSample {
	s := cpuSample{at: time.Now()}
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
	if sinkPID > 0 {
		s.sink = processCPU(sinkPID)
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

// cpuBetween computes the use between two samples; backends is the CPU time of the bench
// database's backends that lived during the run.
func cpuBetween(a, b cpuSample, backends float64) CPUUse {
	wall := b.at.Sub(a.at).Seconds()
	busy := b.machineBusy - a.machineBusy
	total := b.machineTotal - a.machineTotal
	u := CPUUse{
		WallSeconds:   round(wall, 2),
		PollerProcess: round(b.self-a.self, 2),
		Receiver:      round(b.sink-a.sink, 2),
		PostgresOurs:  round(backends, 2),
	}
	if total > 0 {
		u.MachineBusyPct = round(100*busy/total, 1)
	}
	u.OtherMachine = round(max(0, busy-u.PollerProcess-u.Receiver-u.PostgresOurs), 2)
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
