package outboxbench

import (
	"github.com/alternayte/queuebox/bench/machine"
)

// cpuSample is one reading of the CPU counters that the bench reports per run.
type cpuSample struct {
	machine.Sample         // the machine's cores and this process
	sink           float64 // the helper process
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
	s := cpuSample{Sample: machine.Read()}
	if sinkPID > 0 {
		s.sink = machine.ProcessCPU(sinkPID)
	}
	return s
}

// cpuBetween computes the use between two samples; backends is the CPU time of the bench
// database's backends that lived during the run.
func cpuBetween(a, b cpuSample, backends float64) CPUUse {
	busy := b.BusySeconds(a.Sample)
	u := CPUUse{
		WallSeconds:    round(b.WallSeconds(a.Sample), 2),
		MachineBusyPct: b.BusyPct(a.Sample),
		PollerProcess:  round(b.SelfSeconds(a.Sample), 2),
		Receiver:       round(b.sink-a.sink, 2),
		PostgresOurs:   round(backends, 2),
	}
	u.OtherMachine = round(max(0, busy-u.PollerProcess-u.Receiver-u.PostgresOurs), 2)
	return u
}

// round is machine.Round, short for the many figures of the report.
func round(v float64, digits int) float64 { return machine.Round(v, digits) }
