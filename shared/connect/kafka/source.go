//go:build !queuebox_no_kafka

package kafka

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/inbox"
)

// Defaults of a Kafka source.
const (
	// DefaultMaxPollRecords is the default of sources.<name>.maxPollRecords.
	DefaultMaxPollRecords = 100
	// OffsetEarliest and OffsetLatest are the values of autoOffsetReset.
	OffsetEarliest = "earliest"
	OffsetLatest   = "latest"
)

// SourceConfig is one Kafka source (sources.<name> with bootstrapServers, topics and groupId,
// spec/07-bridge-a-broker.md).
type SourceConfig struct {
	// Brokers are the bootstrap servers, host:port each. Required.
	Brokers []string
	// Topics are the topics to consume. Required.
	Topics []string
	// GroupID is the consumer group that every replica shares. Required.
	GroupID string
	// AutoOffsetReset is where a group without a committed offset starts: earliest or
	// latest. Default: earliest.
	AutoOffsetReset string
	// MaxPollRecords is the largest number of records in one poll, stored together.
	// Default: DefaultMaxPollRecords.
	MaxPollRecords int
	// SecurityProtocol, SASLMechanism, SASLUsername and SASLPassword are the connection's
	// security, as for a destination (Config).
	SecurityProtocol SecurityProtocol
	SASLMechanism    string
	SASLUsername     string
	SASLPassword     string
	// SkipTombstones acknowledges a tombstone (a record whose value is null) without a row,
	// counted in queuebox_inbox_tombstones_skipped_total. Default: false, a tombstone is a
	// dead row with last_error Invalid JSON, as any value that is not JSON.
	SkipTombstones bool
	// Intake holds how the inbox stores the records. Its Name is the source name. Required.
	Intake inbox.BrokerSource
	// IntakeOptions are the metrics, waker, logger and clock of the intake.
	IntakeOptions inbox.IntakeOptions
	// Logger receives the consumer's log lines. Default: slog.Default().
	Logger *slog.Logger
	// Backoff is the wait after a failed store or poll. Default: 250 ms doubling to 30 s.
	Backoff connect.Backoff
	// extra are client options of the tests (a custom dialer).
	extra []kgo.Opt
}

// WithDefaults returns c with every unset optional field at its default.
func (c SourceConfig) WithDefaults() SourceConfig {
	if c.AutoOffsetReset == "" {
		c.AutoOffsetReset = OffsetEarliest
	}
	if c.MaxPollRecords <= 0 {
		c.MaxPollRecords = DefaultMaxPollRecords
	}
	if c.SecurityProtocol == "" {
		c.SecurityProtocol = DefaultSecurityProtocol
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.IntakeOptions.Logger == nil {
		c.IntakeOptions.Logger = c.Logger
	}
	return c
}

func (c SourceConfig) validate() error {
	name := c.Intake.Name
	if name == "" {
		return errors.New("creating Kafka source: a source name is required")
	}
	prefix := "sources." + name
	var brokers []string
	for _, b := range c.Brokers {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	switch {
	case len(brokers) == 0:
		return fmt.Errorf("%s.bootstrapServers: at least one broker is required", prefix)
	case len(c.Topics) == 0:
		return fmt.Errorf("%s.topics: at least one topic is required", prefix)
	case c.GroupID == "":
		return fmt.Errorf("%s.groupId is required", prefix)
	}
	for _, t := range c.Topics {
		if strings.TrimSpace(t) == "" {
			return fmt.Errorf("%s.topics: a topic is blank", prefix)
		}
	}
	switch strings.ToLower(c.AutoOffsetReset) {
	case OffsetEarliest, OffsetLatest:
	default:
		return fmt.Errorf("%s.autoOffsetReset: %q: use earliest or latest", prefix, c.AutoOffsetReset)
	}
	return nil
}

// security is the connection security as a destination Config, whose checks it shares.
func (c SourceConfig) security() Config {
	return Config{Brokers: c.Brokers, SecurityProtocol: c.SecurityProtocol, SASLMechanism: c.SASLMechanism,
		SASLUsername: c.SASLUsername, SASLPassword: c.SASLPassword}
}

// Source consumes Kafka topics as a member of a consumer group into the inbox: it stores
// each poll with one batched insert and commits the offsets only after the rows commit.
// When a store fails it stores the records one by one, commits the unbroken run of stored
// records of each partition, and seeks the partition back to its first record that failed.
// Its Check is the health component kafka.<name>.
type Source struct {
	cfg    SourceConfig
	opts   []kgo.Opt
	secret string
	state  connect.SourceState
}

// NewSource checks c and returns the source; it makes no connection.
func NewSource(c SourceConfig) (*Source, error) {
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	prefix := "sources." + c.Intake.Name
	sec := c.security()
	useSASL, err := sec.security(prefix)
	if err != nil {
		return nil, err
	}
	reset := kgo.NewOffset().AtStart()
	if strings.ToLower(c.AutoOffsetReset) == OffsetLatest {
		reset = kgo.NewOffset().AtEnd()
	}
	s := &Source{cfg: c}
	s.opts = []kgo.Opt{
		kgo.SeedBrokers(sec.brokers()...),
		kgo.ClientID("queuebox"),
		kgo.ConsumerGroup(c.GroupID),
		kgo.ConsumeTopics(c.Topics...),
		kgo.ConsumeResetOffset(reset),
		kgo.DisableAutoCommit(),
		// No revoke runs between a poll and its commit, so a partition is never handed to
		// another replica with records stored and not committed.
		kgo.BlockRebalanceOnPoll(),
	}
	if useSASL {
		mech, err := sec.saslMechanism(prefix)
		if err != nil {
			return nil, err
		}
		s.opts = append(s.opts, kgo.SASL(mech))
		s.secret = c.SASLPassword
	}
	if sec.usesTLS() {
		s.opts = append(s.opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	s.opts = append(s.opts, c.extra...)
	return s, nil
}

// Name returns the source name.
func (s *Source) Name() string { return s.cfg.Intake.Name }

// Check is the probe of the health component kafka.<name>.
func (s *Source) Check(ctx context.Context) error { return s.state.Check(ctx) }

// Run consumes until ctx ends, storing through sink, and returns ctx's error. A poll whose
// store began is finished and committed after ctx ends; the group's next member reads what
// is not committed again.
func (s *Source) Run(ctx context.Context, sink inbox.Inserter) error {
	intake, err := inbox.NewIntake(s.cfg.Intake, sink, s.cfg.IntakeOptions)
	if err != nil {
		return err
	}
	log := s.cfg.Logger.With(slog.String("source", s.Name()))
	cl, err := kgo.NewClient(s.opts...)
	if err != nil {
		err = fmt.Errorf("source %s: making the Kafka client: %w", s.Name(), scrub(err, s.secret))
		s.state.Down("the source cannot make its Kafka client", err)
		return err
	}
	defer func() {
		// A poll blocks rebalances until AllowRebalance; leaving the group needs one.
		cl.AllowRebalance()
		cl.Close()
	}()
	backoff := s.cfg.Backoff
	// Up once a broker answers: a poll that finds no record does not return.
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := cl.Ping(pctx)
		cancel()
		if err == nil {
			s.state.Up()
			break
		}
		if ctx.Err() != nil {
			s.state.Down("the source stopped", nil)
			return ctx.Err()
		}
		s.state.Down("the consumer cannot reach a Kafka broker", scrub(err, s.secret))
		log.Warn("kafka source: no broker answers; retrying", slog.String("error", scrub(err, s.secret).Error()))
		if backoff.Wait(ctx) != nil {
			s.state.Down("the source stopped", nil)
			return ctx.Err()
		}
	}
	log.Info("kafka source consuming", slog.String("group", s.cfg.GroupID), slog.Any("topics", s.cfg.Topics))
	for {
		fetches := cl.PollRecords(ctx, s.cfg.MaxPollRecords)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			s.state.Down("the source stopped", nil)
			return ctx.Err()
		}
		var fetchErr error
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				fetchErr = fmt.Errorf("fetching %s[%d]: %w", topic, partition, scrub(err, s.secret))
			}
		})
		records := fetches.Records()
		if fetchErr != nil && len(records) == 0 {
			cl.AllowRebalance()
			s.state.Down("the consumer cannot fetch from Kafka", fetchErr)
			log.Warn("kafka source: fetching failed; retrying", slog.String("error", fetchErr.Error()))
			if backoff.Wait(ctx) != nil {
				s.state.Down("the source stopped", nil)
				return ctx.Err()
			}
			continue
		}
		s.state.Up()
		if len(records) == 0 {
			cl.AllowRebalance()
			continue
		}
		if err := s.handle(ctx, cl, intake, records, log); err != nil {
			cl.AllowRebalance()
			log.Error("kafka source: storing records failed; re-reading from the first failure", slog.Any("error", err))
			if backoff.Wait(ctx) != nil {
				s.state.Down("the source stopped", nil)
				return ctx.Err()
			}
			continue
		}
		backoff.Reset()
		cl.AllowRebalance()
	}
}

// handle stores the records of one poll and commits them. When the batch fails, it stores
// the records one by one in partition order, commits each partition's unbroken run of
// stored records, seeks each partition back to its first failure, and returns the error.
func (s *Source) handle(ctx context.Context, cl *kgo.Client, intake *inbox.Intake, records []*kgo.Record, log *slog.Logger) error {
	sctx, cancel := connect.StoreContext(ctx)
	defer cancel()
	// ds holds the deliveries to store; at[i] is the index in ds of records[i], or -1 for a
	// tombstone that skipTombstones acknowledges without a row.
	ds := make([]inbox.Delivery, 0, len(records))
	at := make([]int, len(records))
	skipped := 0
	for i, r := range records {
		if s.cfg.SkipTombstones && r.Value == nil {
			at[i] = -1
			skipped++
			continue
		}
		at[i] = len(ds)
		ds = append(ds, delivery(r))
	}
	_, err := intake.Store(sctx, ds)
	if err == nil {
		for range skipped {
			intake.TombstoneSkipped()
		}
		if cerr := cl.CommitRecords(sctx, records...); cerr != nil {
			// The rows are stored; the records are read again and found duplicates.
			log.Warn("kafka source: committing offsets failed", slog.String("error", scrub(cerr, s.secret).Error()))
		}
		return nil
	}
	type tp struct {
		topic     string
		partition int32
	}
	failed := map[tp]bool{}
	var stored []*kgo.Record
	seek := map[string]map[int32]kgo.EpochOffset{}
	for i, r := range records {
		k := tp{r.Topic, r.Partition}
		if failed[k] {
			continue
		}
		if at[i] < 0 {
			intake.TombstoneSkipped()
			stored = append(stored, r)
			continue
		}
		if _, err := intake.Store(sctx, ds[at[i]:at[i]+1]); err != nil {
			failed[k] = true
			if seek[r.Topic] == nil {
				seek[r.Topic] = map[int32]kgo.EpochOffset{}
			}
			seek[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset}
			continue
		}
		stored = append(stored, r)
	}
	if len(stored) > 0 {
		if cerr := cl.CommitRecords(sctx, stored...); cerr != nil {
			log.Warn("kafka source: committing offsets failed", slog.String("error", scrub(cerr, s.secret).Error()))
		}
	}
	cl.SetOffsets(seek)
	if len(failed) == 0 {
		return nil // the records stored one by one
	}
	return err
}

// delivery converts a record: its headers as UTF-8 text (base64: and Base64 text when a
// value is not UTF-8), the last value of a repeated name; the record key as the third
// idempotency key and the third aggregate identifier.
func delivery(r *kgo.Record) inbox.Delivery {
	d := inbox.Delivery{Body: r.Value}
	if len(r.Headers) > 0 {
		d.Headers = make(map[string]string, len(r.Headers))
		for _, h := range r.Headers {
			d.Headers[h.Key] = headerText(h.Value)
		}
	}
	if len(r.Key) > 0 {
		key := headerText(r.Key)
		d.BrokerKey, d.RecordKey = key, key
	}
	return d
}

func headerText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b)
}
