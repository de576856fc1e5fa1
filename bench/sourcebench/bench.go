// Package sourcebench is the benchmark of the broker sources (issue 14): messages per second
// that a RabbitMQ, NATS JetStream or Kafka source (shared/connect/{rabbitmq,nats,kafka})
// stores in the inbox from a backlog, beside two ceilings measured in the same run: the
// broker's own consume-and-acknowledge rate with no database, and the batched inbox insert
// rate with no broker.
//
// For each broker and each batch setting (the RabbitMQ prefetchCount, the NATS batchSize, the
// Kafka maxPollRecords) it fills a backlog of JSON messages with unique ids and measures:
//
//   - consume: the same client library with the source's settings consumes the backlog and
//     acknowledges every message as the source does (RabbitMQ: each prefetch window with one
//     multiple acknowledgement; NATS: each message of a fetch; Kafka: the offsets of each
//     poll), and stores nothing;
//   - insert: store.InboxInsertBatch of batches of the same size, one after the other, on a
//     fresh migrated database, rows prepared beforehand;
//   - source: NewSource and Run into the PostgreSQL store on a fresh migrated database, from
//     Run until the last of the backlog's rows is inserted.
//
// RabbitMQ and NATS are the servers on loopback; Kafka is kfake, franz-go's in-process
// broker, which shares the bench's process. Speed is reported here and never asserted in a
// test.
package sourcebench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/machine"
	"github.com/alternayte/queuebox/bench/report"
)

// The brokers of the bench.
const (
	RabbitMQ = "rabbitmq"
	NATS     = "nats"
	Kafka    = "kafka"
)

// Targets of issue 14, on the 2-core development machine.
const (
	// TargetStoredPerSec is the stored rate that RabbitMQ and NATS must reach.
	TargetStoredPerSec = 5000.0
	// TargetCeilingShare is the share of the lower ceiling that every broker must reach.
	TargetCeilingShare = 0.70
)

// Options are the sizes and switches of a bench run; main fills the documented defaults from
// its flags.
type Options struct {
	// ServerURL is the PostgreSQL server where the bench creates its databases.
	ServerURL string
	// RabbitURL and NATSURL are the brokers on loopback.
	RabbitURL, NATSURL string
	// Messages is the backlog (50 000) and BodyBytes the size of each JSON body (300).
	Messages, BodyBytes int
	// Brokers are the brokers to measure, in order.
	Brokers []string
	// Settings are the batch settings per broker: RabbitMQ prefetchCount, NATS batchSize,
	// Kafka maxPollRecords.
	Settings map[string][]int
	// Rounds is how many times each broker and setting is measured (1); the targets judge
	// the median round.
	Rounds int
	// KafkaPartitions is the partition count of the Kafka topic (1).
	KafkaPartitions int
	// NATSMemory keeps the stream in memory; by default it is on file, JetStream's default.
	NATSMemory bool
	// PoolSize is the pgx pool of the source (10, database.poolSize's default).
	PoolSize int
	// RunTimeout bounds each measurement.
	RunTimeout time.Duration
	// LoneMessages is the number of lone messages whose store latency is measured per broker
	// (20; 0 skips the measurement), LoneGap the idle time before each (200 ms).
	LoneMessages int
	LoneGap      time.Duration
	// CPUProfile, when set, is the prefix of one CPU profile per source run
	// (<prefix>-<broker>-<batch>.pprof); the profile covers the whole bench process, so the
	// in-process kfake broker is in the Kafka one.
	CPUProfile string
	// Out is the JSON report file; empty writes none.
	Out string
	// Stdout receives the table.
	Stdout io.Writer
}

// Report is the machine-readable result, written as JSON.
type Report struct {
	Date     string         `json:"date"`
	Machine  Machine        `json:"machine"`
	Postgres PostgresInfo   `json:"postgres"`
	Settings map[string]any `json:"settings"`
	// Rounds are every measured round; Results the median round of each broker and
	// setting (by the source's share of the lower ceiling), which the targets judge.
	Rounds  []Result `json:"rounds"`
	Results []Result `json:"results"`
	Targets []Target `json:"targets"`
	// Lone is the store latency of lone messages, per broker at its default setting.
	Lone     []LoneResult `json:"loneMessage,omitempty"`
	Seconds  float64      `json:"totalSeconds"`
	Problems []string     `json:"problems,omitempty"`
}

// Machine describes where the bench ran.
type Machine = machine.Info

// PostgresInfo is the server's version and the settings that bound commits.
type PostgresInfo = benchdb.ServerInfo

// Result is one broker at one batch setting.
type Result struct {
	Broker string `json:"broker"`
	// Round numbers the rounds from 1; 0 marks the median of several.
	Round int `json:"round"`
	// Setting names the batch setting (prefetchCount, batchSize, maxPollRecords), Batch its
	// value and Default whether it is the documented default.
	Setting string `json:"setting"`
	Batch   int    `json:"batch"`
	Default bool   `json:"default"`
	// Consume is the broker's ceiling, Insert the database's, Source the source's run.
	Consume Measure `json:"consume"`
	Insert  Measure `json:"insert"`
	Source  Measure `json:"source"`
	// Ceiling is the lower of the two ceilings and Share Source's rate as a part of it.
	Ceiling float64 `json:"ceilingPerSec"`
	Share   float64 `json:"shareOfCeiling"`
	// TurnsBound is the rate if receiving a batch and storing it took turns, with each at its
	// ceiling's pace: a·b/(a+b) of the two ceilings. A RabbitMQ source is held to it, since
	// the broker sends the next window only after the acknowledgement, which follows the
	// commit, and a window is at most prefetchCount deliveries. TurnsShare is Source's rate
	// as a part of it.
	TurnsBound float64 `json:"turnsBoundPerSec"`
	TurnsShare float64 `json:"shareOfTurnsBound"`
}

// Measure is one timed run.
type Measure struct {
	Messages int     `json:"messages"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"perSec"`
	// Batches is the number of prefetch windows, fetches or polls and RowsPerBatch the mean
	// messages in one (consume runs).
	Batches      int     `json:"batches,omitempty"`
	RowsPerBatch float64 `json:"messagesPerBatch,omitempty"`
	// Inserts is the number of insert statements and RowsPerInsert the mean rows in one
	// (insert and source runs).
	Inserts       int     `json:"inserts,omitempty"`
	RowsPerInsert float64 `json:"rowsPerInsert,omitempty"`
	// InsertSeconds is the time spent inside the inserts (of Seconds, for a source run:
	// the rest is the broker's and the source's own time).
	InsertSeconds float64 `json:"insertSeconds,omitempty"`
	// Duplicates are inserts that found the row already there (a redelivery); RowsInInbox is
	// the inbox's count after a source run.
	Duplicates  int `json:"duplicates,omitempty"`
	RowsInInbox int `json:"rowsInInbox,omitempty"`
	// Load1 is the 1-minute load average at the start, BusyPct the machine's busy share of
	// all cores during the run, SelfCPU the bench process's CPU seconds.
	Load1   float64 `json:"loadAvg1"`
	BusyPct float64 `json:"machineBusyPct"`
	SelfCPU float64 `json:"selfCpuSeconds"`
	// ServerCPU is the CPU seconds of every process of PostgreSQL, RabbitMQ (beam.smp) and
	// NATS during the run, whoever's work it was (other users of the servers included).
	ServerCPU map[string]float64 `json:"serverCpuSeconds,omitempty"`
}

// Target is one target of issue 14 with its verdict.
type Target struct {
	Name   string  `json:"name"`
	Want   float64 `json:"want"`
	Got    float64 `json:"got"`
	Met    bool    `json:"met"`
	Detail string  `json:"detail"`
}

// backlog is one broker's backlog of messages, filled and ready to consume.
type backlog interface {
	// consume reads n messages with the source's settings at batch size batch and
	// acknowledges them as the source does, storing nothing; it returns the number of
	// batches (prefetch windows, fetches, polls).
	consume(ctx context.Context, n, batch int) (int, error)
	// source returns the broker's source at batch size batch, named name.
	source(name string, batch int) (runner, error)
	// publish sends one message with body to the backlog and waits for the broker to take it.
	publish(ctx context.Context, body []byte) error
	// close deletes the backlog.
	close()
}

// brokerBench fills backlogs of one broker.
type brokerBench interface {
	// setting is the name of the batch setting and its default.
	setting() (string, int)
	// fill makes a fresh queue, stream or topic holding bodies.
	fill(ctx context.Context, bodies [][]byte) (backlog, error)
	close()
}

// Run measures every broker at every setting, prints the table to o.Stdout and writes the
// JSON report. It returns an error when a run could not be measured.
func Run(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	rep := &Report{
		Date:    start.UTC().Format(time.RFC3339),
		Machine: machine.Describe(),
		Settings: map[string]any{"messages": o.Messages, "bodyBytes": o.BodyBytes, "brokers": o.Brokers,
			"batchSettings": o.Settings, "kafkaPartitions": o.KafkaPartitions, "natsMemoryStorage": o.NATSMemory,
			"poolSize": o.PoolSize, "rounds": o.Rounds,
			"loneMessages": o.LoneMessages, "loneGapMs": o.LoneGap.Milliseconds()},
	}
	if db, err := benchdb.Create(ctx, o.ServerURL, 1, logf); err == nil {
		rep.Postgres.Version, rep.Postgres.Settings, _ = db.ServerFacts(ctx)
		db.Drop()
	} else {
		return nil, err
	}
	fmt.Fprintf(o.Stdout, "sourcebench: %d messages of %d bytes per run, load average %.2f\n", o.Messages, o.BodyBytes, rep.Machine.LoadAvgStart[0])
	var failed error
	for _, name := range o.Brokers {
		b, err := newBroker(ctx, name, o)
		if err != nil {
			rep.Problems = append(rep.Problems, err.Error())
			failed = errors.Join(failed, err)
			continue
		}
		settingName, def := b.setting()
		for _, batch := range o.Settings[name] {
			var rounds []Result
			for r := 1; r <= max(1, o.Rounds) && ctx.Err() == nil; r++ {
				res, err := measure(ctx, o, name, b, batch, r)
				res.Setting, res.Default = settingName, batch == def
				if err != nil {
					err = fmt.Errorf("%s at %s %d, round %d: %w", name, settingName, batch, r, err)
					rep.Problems = append(rep.Problems, err.Error())
					failed = errors.Join(failed, err)
					continue
				}
				rep.Rounds = append(rep.Rounds, res)
				rounds = append(rounds, res)
				printResult(o.Stdout, res)
			}
			if len(rounds) > 0 {
				rep.Results = append(rep.Results, median(rounds))
			}
		}
		if o.LoneMessages > 0 && ctx.Err() == nil {
			lone, err := loneLatency(ctx, o, name, b)
			if err != nil {
				err = fmt.Errorf("%s lone messages: %w", name, err)
				rep.Problems = append(rep.Problems, err.Error())
				failed = errors.Join(failed, err)
			} else {
				rep.Lone = append(rep.Lone, lone)
				printLone(o.Stdout, lone)
			}
		}
		b.close()
	}
	rep.Targets = targets(rep.Results)
	rep.Machine.LoadAvgEnd = machine.LoadAverage()
	rep.Seconds = round(time.Since(start).Seconds(), 1)
	printTargets(o.Stdout, rep)
	if o.Out != "" {
		if err := report.WriteJSON(o.Out, rep); err != nil {
			return rep, err
		}
	}
	return rep, failed
}

func newBroker(ctx context.Context, name string, o Options) (brokerBench, error) {
	switch name {
	case RabbitMQ:
		return newRabbit(ctx, o.RabbitURL)
	case NATS:
		return newNATS(ctx, o.NATSURL, o.NATSMemory)
	case Kafka:
		return newKafka(o.KafkaPartitions), nil
	}
	return nil, fmt.Errorf("unknown broker %q (use rabbitmq, nats, kafka)", name)
}

// measure runs the three measurements of one broker at one batch size, back to back: both
// backlogs are filled first, so that the three figures are taken as close in time as they
// can be.
func measure(ctx context.Context, o Options, name string, b brokerBench, batch, round int) (Result, error) {
	res := Result{Broker: name, Batch: batch, Round: round}
	logf("%s batch %d round %d: filling two backlogs of %d messages", name, batch, round, o.Messages)
	first, err := b.fill(ctx, bodies(o.Messages, o.BodyBytes))
	if err != nil {
		return res, fmt.Errorf("filling the backlog: %w", err)
	}
	second, err := b.fill(ctx, bodies(o.Messages, o.BodyBytes))
	if err != nil {
		first.close()
		return res, fmt.Errorf("filling the backlog: %w", err)
	}
	defer second.close()
	rctx, cancel := context.WithTimeout(ctx, o.RunTimeout)
	var batches int
	res.Consume, err = timed(o.Messages, func() (err error) {
		batches, err = first.consume(rctx, o.Messages, batch)
		return err
	})
	cancel()
	first.close()
	res.Consume.Batches = batches
	res.Consume.RowsPerBatch = round1(float64(o.Messages) / float64(max(1, batches)))
	if err != nil {
		return res, fmt.Errorf("consuming without a database: %w", err)
	}
	if res.Insert, err = insertCeiling(ctx, o, batch); err != nil {
		return res, fmt.Errorf("inserting without a broker: %w", err)
	}
	if res.Source, err = sourceRun(ctx, o, second, name, batch); err != nil {
		return res, fmt.Errorf("source run: %w", err)
	}
	res.judge()
	return res, nil
}

// judge sets the ceiling and the share.
func (r *Result) judge() {
	a, b := r.Consume.PerSec, r.Insert.PerSec
	r.Ceiling = min(a, b)
	if r.Ceiling > 0 {
		r.Share = round(r.Source.PerSec/r.Ceiling, 3)
		r.TurnsBound = round(a*b/(a+b), 0)
		r.TurnsShare = round(r.Source.PerSec/r.TurnsBound, 3)
	}
}

func round1(v float64) float64 { return round(v, 1) }

// median returns the result whose source share is the median of rounds (the lower middle
// one of an even count), marked as round 0.
func median(rounds []Result) Result {
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b Result) int { return cmp.Compare(a.Share, b.Share) })
	m := sorted[(len(sorted)-1)/2]
	m.Round = 0
	return m
}

// settle collects the heap and returns the freed memory to the operating system before a
// measurement, so that the runtime's scavenger does not release what the phase before left
// (the bodies of the backlogs, the ceiling's rows) on the measurement's clock: in the NATS
// source run it took 23 % of the bench process's CPU (madvise) before this.
func settle() {
	debug.FreeOSMemory()
}

// timed runs f and measures it as n messages, from a settled heap.
func timed(n int, f func() error) (Measure, error) {
	settle()
	m := Measure{Messages: n, Load1: machine.LoadAverage()[0]}
	before := readCPU()
	t0 := time.Now()
	err := f()
	m.Seconds = time.Since(t0).Seconds()
	after := readCPU()
	m.BusyPct, m.SelfCPU = after.busyPct(before), after.selfCPU(before)
	m.ServerCPU = after.serverCPU(before)
	if m.Seconds > 0 {
		m.PerSec = round(float64(n)/m.Seconds, 0)
	}
	m.Seconds = round(m.Seconds, 3)
	return m, err
}

// bodies returns n JSON bodies of about size bytes, each with a unique id.
func bodies(n, size int) [][]byte {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	out := make([][]byte, n)
	for i := range out {
		b := fmt.Appendf(nil, `{"id":"%s-%08d","eventType":"order.created","customerId":"c-%05d","amount":%d.%02d,"note":"`,
			run, i, i%10000, 10+i%990, i%100)
		for len(b) < size-2 {
			b = append(b, "abcdefghijklmnopqrstuvwxyz"[len(b)%26])
		}
		out[i] = append(b, `"}`...)
	}
	return out
}

// targets judges the results: RabbitMQ and NATS at 5 000 stored/s (at the default setting and
// at the best), every broker at 70 % of the lower ceiling.
func targets(results []Result) []Target {
	var out []Target
	for _, broker := range []string{RabbitMQ, NATS, Kafka} {
		var def, best *Result
		for i := range results {
			r := &results[i]
			if r.Broker != broker {
				continue
			}
			if r.Default {
				def = r
			}
			if best == nil || r.Source.PerSec > best.Source.PerSec {
				best = r
			}
		}
		if best == nil {
			continue
		}
		for _, r := range uniq(def, best) {
			label := fmt.Sprintf("%s %s %d", broker, r.Setting, r.Batch)
			if r.Default {
				label += " (default)"
			}
			if broker != Kafka {
				out = append(out, Target{Name: label + ": stored/s", Want: TargetStoredPerSec, Got: r.Source.PerSec,
					Met: r.Source.PerSec >= TargetStoredPerSec, Detail: fmt.Sprintf("%.0f messages/s stored", r.Source.PerSec)})
			}
			out = append(out, Target{Name: label + ": share of the lower ceiling", Want: TargetCeilingShare, Got: r.Share,
				Met: r.Share >= TargetCeilingShare, Detail: fmt.Sprintf("%.0f of min(%.0f, %.0f) messages/s", r.Source.PerSec, r.Consume.PerSec, r.Insert.PerSec)})
		}
	}
	return out
}

func uniq(def, best *Result) []*Result {
	if def == nil || def == best {
		return []*Result{best}
	}
	return []*Result{def, best}
}

func printResult(w io.Writer, r Result) {
	d := ""
	if r.Default {
		d = " (default)"
	}
	if r.Round > 0 {
		d += fmt.Sprintf(" round %d", r.Round)
	}
	fmt.Fprintf(w, "%-8s %s %d%s: consume+ack %7.0f/s (%.1f/batch) | insert batch %7.0f/s | source stored %7.0f/s (%.1f rows/insert, %.0f %% of the time inserting, %d dup) = %5.1f %% of %.0f (%.0f %% of %.0f taking turns) | load1 %.1f/%.1f/%.1f, busy %.0f/%.0f/%.0f %%\n         cpu us/msg bench+%s+postgres: consume %s, insert %s, source %s\n",
		r.Broker, r.Setting, r.Batch, d, r.Consume.PerSec, r.Consume.RowsPerBatch, r.Insert.PerSec, r.Source.PerSec, r.Source.RowsPerInsert,
		100*r.Source.InsertSeconds/max(r.Source.Seconds, 1e-9), r.Source.Duplicates, 100*r.Share, r.Ceiling, 100*r.TurnsShare, r.TurnsBound, r.Consume.Load1, r.Insert.Load1, r.Source.Load1,
		r.Consume.BusyPct, r.Insert.BusyPct, r.Source.BusyPct,
		serverOf(r.Broker), cpuPerMessage(r.Consume, r.Broker), cpuPerMessage(r.Insert, r.Broker), cpuPerMessage(r.Source, r.Broker))
}

// serverOf names the broker's server process in the CPU column.
func serverOf(broker string) string {
	if broker == Kafka {
		return "kfake(in bench)"
	}
	return broker
}

// cpuPerMessage is the CPU per message of the bench process, the broker's server and
// PostgreSQL, in microseconds.
func cpuPerMessage(m Measure, broker string) string {
	per := func(sec float64) float64 { return 1e6 * sec / float64(max(1, m.Messages)) }
	if broker == Kafka {
		return fmt.Sprintf("%.0f+%.0f", per(m.SelfCPU), per(m.ServerCPU["postgres"]))
	}
	return fmt.Sprintf("%.0f+%.0f+%.0f", per(m.SelfCPU), per(m.ServerCPU[broker]), per(m.ServerCPU["postgres"]))
}

func printTargets(w io.Writer, rep *Report) {
	if len(rep.Rounds) > len(rep.Results) {
		fmt.Fprintf(w, "\nmedian rounds:\n")
		for _, r := range rep.Results {
			printResult(w, r)
		}
	}
	if len(rep.Lone) > 0 {
		fmt.Fprintf(w, "\nlone messages:\n")
		for _, r := range rep.Lone {
			printLone(w, r)
		}
	}
	fmt.Fprintf(w, "\ntargets (issue 14):\n")
	for _, t := range rep.Targets {
		verdict := "missed"
		if t.Met {
			verdict = "met"
		}
		fmt.Fprintf(w, "  %-60s %s (%s)\n", t.Name, verdict, t.Detail)
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "PROBLEM: %s\n", p)
	}
	fmt.Fprintf(w, "total %.1f s, load average at the end %.2f\n", rep.Seconds, rep.Machine.LoadAvgEnd[0])
}

// ParseInts parses a comma-separated list of positive integers.
func ParseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sourcebench: "+format+"\n", args...)
}
