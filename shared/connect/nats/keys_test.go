//go:build !queuebox_no_nats

package nats_test

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/consumetest"
	qbnats "github.com/alternayte/queuebox/shared/connect/nats"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest/dbstore"
)

// TestBatchSizeBoundsEachStoredBatch: no insert holds more messages than one fetch.
func TestBatchSizeBoundsEachStoredBatch(t *testing.T) {
	pool, st := dbstore.New(t)
	f := newFixture(t)
	const n = 100
	for i := range n {
		f.produce(t, "b", `{"id":"b-`+strconv.Itoa(i)+`"}`, nil)
	}
	sink := consumetest.NewFailingSink(st)
	s := newSource(t, f, qbnats.SourceConfig{BatchSize: 7})
	consumetest.Start(t, s, sink)
	dbtest.WaitInboxRows(t, pool, s.Name(), n, waitLimit)
	if got := sink.MaxBatch(); got > 7 {
		t.Errorf("an insert held %d messages, above batchSize 7", got)
	}
}

// privateServer starts a NATS server with JetStream on a free port with the given auth
// arguments, for the credential tests (the machine's server has no auth).
func privateServer(t *testing.T, auth ...string) string {
	t.Helper()
	url, _ := privateServerAt(t, freePort(t), t.TempDir(), auth...)
	return url
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// authClient connects to url with the credential option and returns its JetStream; the
// connection closes at the test's end.
func authClient(t *testing.T, url string, credential natsgo.Option) jetstream.JetStream {
	t.Helper()
	nc, err := natsgo.Connect(url, credential)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// waitRefused waits until the health check of src names the server's refusal of its
// credentials, and returns that error.
func waitRefused(t *testing.T, src *qbnats.Source) error {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(20 * time.Millisecond) {
		err := src.Check(context.Background())
		if err != nil && strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("the health of the source with wrong credentials never named the refusal within %s: %v", waitLimit, err)
		}
	}
}

// privateServerAt starts nats-server with JetStream on port, keeping its store in dir, and
// returns its URL and a function that kills it (also called at the test's end).
func privateServerAt(t *testing.T, port int, dir string, auth ...string) (string, func()) {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		bin = "/usr/sbin/nats-server"
	}
	args := append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir}, auth...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a private nats-server (%s): %v; install the nats-server package", bin, err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) }
	t.Cleanup(stop)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(waitLimit)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return "nats://" + addr, stop
		}
		if time.Now().After(deadline) {
			t.Fatalf("the private nats-server did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCredentials consumes from servers that require a token, or a user name and a
// password; wrong credentials leave the source down with a reason that holds no secret.
func TestCredentials(t *testing.T) {
	cases := []struct {
		name      string
		auth      []string
		client    natsgo.Option
		good, bad qbnats.SourceConfig
		secret    string
	}{
		{"token", []string{"--auth", "tok-s3cret"}, natsgo.Token("tok-s3cret"),
			qbnats.SourceConfig{Token: "tok-s3cret"}, qbnats.SourceConfig{Token: "tok-wrong-777"}, "tok-wrong-777"},
		{"user and password", []string{"--user", "qb", "--pass", "pw-s3cret"}, natsgo.UserInfo("qb", "pw-s3cret"),
			qbnats.SourceConfig{Username: "qb", Password: "pw-s3cret"}, qbnats.SourceConfig{Username: "qb", Password: "pw-wrong-777"}, "pw-wrong-777"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool, st := dbstore.New(t)
			url := privateServer(t, tc.auth...)
			js := authClient(t, url, tc.client)
			ctx := context.Background()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "AUTH", Subjects: []string{"auth.>"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := js.Publish(ctx, "auth.x", []byte(`{"id":"auth-1"}`)); err != nil {
				t.Fatal(err)
			}
			for _, c := range []*qbnats.SourceConfig{&tc.good, &tc.bad} {
				c.Servers, c.Stream, c.Durable = []string{url}, "AUTH", "qb-"+unique(t)
				c.Intake.Name = "nats-auth-" + unique(t)
			}
			good, err := qbnats.NewSource(tc.good)
			if err != nil {
				t.Fatal(err)
			}
			consumetest.Start(t, good, st)
			dbtest.WaitInboxRows(t, pool, good.Name(), 1, waitLimit)

			bad, err := qbnats.NewSource(tc.bad)
			if err != nil {
				t.Fatal(err)
			}
			// The server refuses the credentials: the health check must say so (not only that
			// the connection closed) while Run keeps retrying, until it is stopped.
			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			ran := make(chan error, 1)
			go func() { ran <- bad.Run(runCtx, st) }()
			refused := waitRefused(t, bad)
			cancel()
			var runErr error
			select {
			case runErr = <-ran:
			case <-time.After(waitLimit):
				t.Fatalf("Run did not return within %s of its context's end", waitLimit)
			}
			cerr := bad.Check(ctx)
			if runErr == nil || cerr == nil {
				t.Fatalf("the source with wrong credentials: Run = %v, health = %v; want both errors", runErr, cerr)
			}
			for _, text := range []string{runErr.Error(), cerr.Error(), refused.Error()} {
				if strings.Contains(text, tc.secret) {
					t.Errorf("an error shows the credential: %s", text)
				}
			}
			if rs := dbtest.InboxRows(t, pool, bad.Name()); len(rs) != 0 {
				t.Errorf("the source with wrong credentials stored %d rows", len(rs))
			}
		})
	}
}

// TestRefusedCredentialsAreTriedAgainOnANewConnection: the NATS client closes its connection
// for good after the server refused the credentials twice; the source then connects anew at
// its next attempt, so once the server accepts the credentials (here: restarted on the same
// port and store with them) the source consumes without a restart of its own.
func TestRefusedCredentialsAreTriedAgainOnANewConnection(t *testing.T) {
	pool, st := dbstore.New(t)
	port, dir := freePort(t), t.TempDir()
	url, stop := privateServerAt(t, port, dir, "--auth", "tok-old")
	// The stream exists before the source runs (kept in dir across the restart below): a
	// source that finds no stream stops for good, by design.
	ctx := context.Background()
	if _, err := authClient(t, url, natsgo.Token("tok-old")).CreateStream(ctx, jetstream.StreamConfig{Name: "AUTH", Subjects: []string{"auth.>"}}); err != nil {
		t.Fatal(err)
	}

	cfg := qbnats.SourceConfig{Token: "tok-new", Stream: "AUTH", Durable: "qb-" + unique(t),
		Backoff: connect.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond}}
	cfg.Servers, cfg.Intake.Name = []string{url}, "nats-auth-"+unique(t)
	src, err := qbnats.NewSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	consumetest.Start(t, src, st)
	waitRefused(t, src)

	stop()
	url, _ = privateServerAt(t, port, dir, "--auth", "tok-new")
	if _, err := authClient(t, url, natsgo.Token("tok-new")).Publish(ctx, "auth.x", []byte(`{"id":"auth-after-fix"}`)); err != nil {
		t.Fatal(err)
	}
	dbtest.WaitInboxRows(t, pool, src.Name(), 1, waitLimit)
}
