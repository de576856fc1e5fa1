package sourcebench

import (
	"os"
	"strconv"
	"strings"

	"github.com/alternayte/queuebox/bench/machine"
)

// cpuSample is one reading of the machine's and the process's CPU counters, in seconds.
type cpuSample struct {
	machine.Sample // every core since boot, and this process
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
		out[server][pid] = machine.ProcessCPU(pid)
	}
	return out
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
	return cpuSample{Sample: machine.Read(), servers: readServers()}
}

// busyPct is the machine's busy share of all cores between before and s.
func (s cpuSample) busyPct(before cpuSample) float64 { return s.BusyPct(before.Sample) }

// selfCPU is the bench process's CPU seconds between before and s, rounded to 2 digits.
func (s cpuSample) selfCPU(before cpuSample) float64 { return round(s.SelfSeconds(before.Sample), 2) }

// round is machine.Round, short for the many figures of the report.
func round(v float64, digits int) float64 { return machine.Round(v, digits) }
