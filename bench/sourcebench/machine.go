package sourcebench

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/stat.
const clockTicks = 100

// cpuSample is one reading of the machine's and the process's CPU counters, in seconds.
type cpuSample struct {
	busy, total float64 // every core, since boot
	self        float64 // this process, user + system
	// servers are the user + system seconds of every process of each server, by name
	// (serverNames); a process that ends between two samples is left out.
	servers map[string]map[int]float64
}

// serverNames maps the command names in /proc/<pid>/comm to the server they belong to.
var serverNames = map[string]string{"postgres": "postgres", "beam.smp": RabbitMQ, "nats-server": NATS}

// readServers reads the CPU seconds of every process of the servers.
func readServers() map[string]map[int]float64 {
	out := map[string]map[int]float64{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil {
			continue
		}
		server, ok := serverNames[strings.TrimSpace(string(comm))]
		if !ok {
			continue
		}
		if out[server] == nil {
			out[server] = map[int]float64{}
		}
		out[server][pid] = processCPU(pid)
	}
	return out
}

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

// serverCPU returns the CPU seconds that each server spent between before and s.
func (s cpuSample) serverCPU(before cpuSample) map[string]float64 {
	out := map[string]float64{}
	for server, procs := range s.servers {
		var sum float64
		for pid, after := range procs {
			sum += after - before.servers[server][pid] // a process started since counts whole
		}
		out[server] = round(sum, 2)
	}
	return out
}

func readCPU() cpuSample {
	var s cpuSample
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
		s.total, s.busy = total/clockTicks, (total-idle)/clockTicks
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = tv(ru.Utime) + tv(ru.Stime)
	}
	s.servers = readServers()
	return s
}

// busyPct is the machine's busy share of all cores between before and s.
func (s cpuSample) busyPct(before cpuSample) float64 {
	if total := s.total - before.total; total > 0 {
		return round(100*(s.busy-before.busy)/total, 1)
	}
	return 0
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

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

// startProfile starts a CPU profile into path; the function it returns stops it.
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting the CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
