package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/alternayte/queuebox/shared/connect/connecttest"
)

// The partition scenario: each replica reaches PostgreSQL through a TCP proxy of the suite,
// and the suite freezes one replica's proxy at a time: its connections stay open and pass
// nothing, as in a network partition, while the receiver stays reachable. The receiver
// answers 5 % of the deliveries after slowFor, longer than the lease, so a partition catches
// publishes in flight; the other replicas reclaim the cut-off replica's rows once their leases
// expire and deliver them and the rows behind them. A replica that went on publishing past its
// lease would have a slow delivery accepted after a later row of its key: the judge counts
// every accepted delivery, duplicates included, in the order the receiver accepted them.
const (
	// partitionFor is how long one partition lasts: more than three leases (3 s), so that the
	// other replicas reclaim and deliver while it lasts.
	partitionFor = 10 * time.Second
	// slowFor is how long the receiver holds a slow delivery before it accepts it.
	slowFor = 8 * time.Second
	// partitionDestinationTimeout is the HTTP destination's timeoutMs of the scenario: longer
	// than a slow answer, so that only the lease can stop a slow publish.
	partitionDestinationTimeout = 30 * time.Second
)

// leaseDeadlineLines are the log messages of a publish stopped at its claim's local lease
// deadline (shared/outbox), and of a failed renewal.
var leaseDeadlineLines = []string{
	"outbox publish cancelled at its claim's local lease deadline",
	"outbox publish not started: its claim passed its local lease deadline",
	"renewing outbox leases failed",
}

func (s *suite) partitionScenario(ctx context.Context, res *result) error {
	res.title = fmt.Sprintf("Network partitions (%d x %s) between one replica and PostgreSQL, connections held open, while 5 %% of deliveries take %s",
		s.o.partitions, partitionFor, slowFor)
	e, err := s.newEnv(ctx, "partition", faults{slow: 0.05, slowFor: slowFor})
	defer e.close()
	if err != nil {
		return err
	}
	if err := os.WriteFile(e.cfg, fmt.Appendf(nil, configYAML, s.cl.jdbc(e.db), s.o.claimMode, e.rcv.url, partitionDestinationTimeout.Milliseconds()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", e.cfg, err)
	}
	proxies := make([]*connecttest.Proxy, s.o.replicas)
	for i := range proxies {
		px, err := connecttest.Start(fmt.Sprintf("127.0.0.1:%d", s.o.port))
		if err != nil {
			return err
		}
		defer px.Close()
		proxies[i] = px
	}
	e.replicaEnv = func(i int) []string {
		return []string{fmt.Sprintf("QUEUEBOX_DATABASE_URL=jdbc:postgresql://%s/%s", proxies[i].Addr(), e.db)}
	}
	rows := max(100, s.o.rows/5)
	spread := time.Duration(s.o.partitions)*(partitionFor+2*time.Second) + 5*time.Second
	var cut []string
	err = s.outboxPass(ctx, res, e, rows, s.o.replicas, spread, false, noMax, func(ctx context.Context) error {
		for range s.o.partitions {
			if err := sleep(ctx, time.Second+time.Duration(s.rng.Int64N(int64(time.Second)))); err != nil {
				return err
			}
			k := s.rng.IntN(len(proxies))
			proxies[k].Freeze()
			err := sleep(ctx, partitionFor)
			proxies[k].Thaw()
			if err != nil {
				return err
			}
			cut = append(cut, e.replicas[k].name)
		}
		return nil
	})
	res.fig("partitions", "%d of %s each: %s", len(cut), partitionFor, strings.Join(cut, ", "))
	accepted, gone := e.rcv.slowCounts()
	res.fig("slow deliveries (answered after "+slowFor.String()+")", "%d accepted, %d abandoned by the sender before the answer", accepted, gone)
	res.fig("publishes stopped at the lease deadline, failed renewals (replica logs)", "%s", countLines(e.replicas, leaseDeadlineLines))
	if len(cut) != s.o.partitions {
		res.fail("%d of %d partitions ran", len(cut), s.o.partitions)
	}
	return err
}

// countLines counts the messages in the logs of ps, by message.
func countLines(ps []*proc, messages []string) string {
	counts := make([]int, len(messages))
	for _, p := range ps {
		b, err := os.ReadFile(p.log)
		if err != nil {
			continue
		}
		for i, m := range messages {
			counts[i] += strings.Count(string(b), m)
		}
	}
	var parts []string
	for i, n := range counts {
		parts = append(parts, fmt.Sprintf("%d x %q", n, messages[i]))
	}
	return strings.Join(parts, ", ")
}
