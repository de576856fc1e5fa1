package inboxbench

import (
	"fmt"
	"os"

	"github.com/alternayte/queuebox/bench/machine"
)

// cpuSample is one reading of the CPU counters that the bench reports per phase.
type cpuSample struct {
	machine.Sample         // the machine's cores and this process (QueueBox)
	loadgen        float64 // the load generator process
	backends       map[int]float64
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
	s := cpuSample{Sample: machine.Read(), backends: backends}
	if loadgenPID > 0 {
		s.loadgen = machine.ProcessCPU(loadgenPID)
	}
	return s
}

// cpuBetween computes the use between two samples for a phase that answered requests.
func cpuBetween(a, b cpuSample, requests int) CPUUse {
	busy := b.BusySeconds(a.Sample)
	var backends float64
	for pid, after := range b.backends {
		backends += after - a.backends[pid] // a backend opened during the phase counts whole
	}
	u := CPUUse{
		WallSeconds:    round(b.WallSeconds(a.Sample), 2),
		MachineBusyPct: b.BusyPct(a.Sample),
		QueueBox:       round(b.SelfSeconds(a.Sample), 2),
		LoadGenerator:  round(b.loadgen-a.loadgen, 2),
		PostgresOurs:   round(backends, 2),
	}
	u.Other = round(max(0, busy-u.QueueBox-u.LoadGenerator-u.PostgresOurs), 2)
	if requests > 0 {
		u.QueueBoxUsPerRequest = round(1e6*u.QueueBox/float64(requests), 1)
		u.PostgresUsPerRequest = round(1e6*u.PostgresOurs/float64(requests), 1)
		u.LoadGenUsPerRequest = round(1e6*u.LoadGenerator/float64(requests), 1)
	}
	return u
}

// round is machine.Round, short for the many figures of the report.
func round(v float64, digits int) float64 { return machine.Round(v, digits) }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "inboxbench: "+format+"\n", args...)
}
