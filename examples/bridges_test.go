package examples

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// servicesHint says how to start the brokers of the examples.
const servicesHint = "start it with: make services (scripts/ensure-services.sh)"

// bridge is one broker example: its folder, the source of its queuebox.yml, the prefix of the
// idempotency key its message carries, and the service it needs besides PostgreSQL.
type bridge struct {
	dir, source, keyPrefix, eventType string
	// ports are the fixed ports the script listens on besides serve (kfake); each must be
	// free again after the script exits.
	ports []int
	check func(t *testing.T)
}

// TestBridgeExamples runs examples/rabbitmq-bridge/run.sh, examples/kafka-bridge/run.sh and
// examples/nats-bridge/run.sh against the machine's PostgreSQL, RabbitMQ and NATS JetStream
// (Kafka is kfake, started by the script) and checks that each prints the inbox row of the
// message it published, and that it stopped what it started. A service that is down fails
// the test with how to start it.
func TestBridgeExamples(t *testing.T) {
	pg := checkPostgres(t)
	bin := buildQueueBox(t)
	for _, b := range []bridge{
		{dir: "rabbitmq-bridge", source: "orders-queue", keyPrefix: "msg-", eventType: "order.created", check: checkRabbitMQ},
		{dir: "kafka-bridge", source: "orders-topic", keyPrefix: "evt-", eventType: "order.created", ports: []int{19092}},
		{dir: "nats-bridge", source: "orders-stream", keyPrefix: "evt-", eventType: "order.created", check: checkNATS},
	} {
		t.Run(b.dir, func(t *testing.T) {
			t.Parallel()
			if b.check != nil {
				b.check(t)
			}
			runBridge(t, b, bin, pg)
		})
	}
}

func runBridge(t *testing.T, b bridge, bin string, pg []string) {
	id := fmt.Sprintf("test-%d", time.Now().UnixNano())
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(b.dir, "run.sh"))
	// On the timeout the script gets SIGTERM, so that its trap stops what it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	cmd.Env = append(environWithout("QUEUEBOX_", "PG"), pg...)
	cmd.Env = append(cmd.Env,
		"QUEUEBOX_BIN="+bin,
		"QUEUEBOX_EXAMPLE_ID="+id,
		"QUEUEBOX_EXAMPLE_TIMEOUT=45",
		"QUEUEBOX_SERVER_HTTPPORT="+strconv.Itoa(port),
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	output := out.String()
	t.Logf("%s/run.sh took %s", b.dir, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s/run.sh: %v\n%s", b.dir, err, output)
	}
	key := b.keyPrefix + id
	for _, want := range [][2]string{
		{"source", b.source},
		{"idempotency_key", key},
		{"event_type", b.eventType},
		{"consumption", "pull"},
		{"state", "pending"},
	} {
		if !regexp.MustCompile(`(?m)^` + want[0] + `\s+\| ` + regexp.QuoteMeta(want[1]) + `$`).MatchString(output) {
			t.Errorf("the output has no row line %q | %q:\n%s", want[0], want[1], output)
		}
	}
	if !regexp.MustCompile(`(?m)^payload\s+\| \{.*"` + regexp.QuoteMeta(key) + `".*\}$`).MatchString(output) {
		t.Errorf("the output has no payload holding %q:\n%s", key, output)
	}
	for _, want := range []string{"stopped queuebox serve", "dropped database"} {
		if !strings.Contains(output, want) {
			t.Errorf("the output does not say %q:\n%s", want, output)
		}
	}
	for _, p := range append([]int{port}, b.ports...) {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), time.Second); err == nil {
			c.Close()
			t.Errorf("something still listens on 127.0.0.1:%d after %s/run.sh exited", p, b.dir)
		}
	}
}

// buildQueueBox builds the queuebox command of this checkout once for the three scripts,
// which would otherwise build bin/queuebox together.
func buildQueueBox(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "queuebox")
	cmd := exec.Command("go", "build", "-o", bin, "./local")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./local: %v\n%s", err, out)
	}
	return bin
}

// checkPostgres fails the test when the PostgreSQL server of the tests does not answer, and
// returns the PG* variables that point the scripts at it.
func checkPostgres(t *testing.T) []string {
	t.Helper()
	server := dbtest.ServerURL()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("PostgreSQL does not answer (%v); %s", err, dbtest.StartHint)
	}
	_ = conn.Close(ctx)
	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("parsing the test database URL: %v", err)
	}
	env := []string{"PGHOST=" + u.Hostname(), "PGPORT=" + cmpOr(u.Port(), "5432"), "PGUSER=" + cmpOr(u.User.Username(), "postgres")}
	if p, ok := u.User.Password(); ok {
		env = append(env, "PGPASSWORD="+p)
	}
	return env
}

func checkRabbitMQ(t *testing.T) {
	t.Helper()
	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/")
	if err != nil {
		t.Fatalf("RabbitMQ is not reachable at 127.0.0.1:5672 as guest/guest (%v); %s", err, servicesHint)
	}
	_ = conn.Close()
}

func checkNATS(t *testing.T) {
	t.Helper()
	nc, err := natsgo.Connect("nats://127.0.0.1:4222", natsgo.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("NATS is not reachable at 127.0.0.1:4222 (%v); %s", err, servicesHint)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = js.AccountInfo(ctx)
	}
	if err != nil {
		t.Fatalf("NATS at 127.0.0.1:4222 has no JetStream (%v); run nats-server with -js, or %s", err, servicesHint)
	}
}

// environWithout returns the process environment without the variables of these prefixes,
// so that a QUEUEBOX_ or PG variable of the developer does not change what the scripts do.
func environWithout(prefixes ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
