// Command stream creates the JetStream stream of the nats-bridge example, or deletes it with
// -delete. QueueBox never creates a stream (its retention and replication are the operator's
// decisions), so the example creates one before `queuebox serve` starts.
//
//	stream -servers nats://127.0.0.1:4222 -name EXAMPLE_ORDERS -subjects 'example.orders.>'
//	stream -servers nats://127.0.0.1:4222 -name EXAMPLE_ORDERS -delete
//
// It prints "stream NAME created" when it created the stream and "stream NAME exists" when a
// stream of that name was already there, which it leaves as it is.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	servers := flag.String("servers", "nats://127.0.0.1:4222", "the NATS servers")
	name := flag.String("name", "EXAMPLE_ORDERS", "the stream name")
	subjects := flag.String("subjects", "example.orders.>", "the subjects of the stream, comma-separated")
	del := flag.Bool("delete", false, "delete the stream instead of creating it")
	flag.Parse()
	if err := run(*servers, *name, strings.Split(*subjects, ","), *del); err != nil {
		fmt.Fprintln(os.Stderr, "stream:", err)
		os.Exit(1)
	}
}

func run(servers, name string, subjects []string, del bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	nc, err := natsgo.Connect(servers)
	if err != nil {
		return fmt.Errorf("connecting to NATS at %s: %w", servers, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("opening JetStream: %w", err)
	}
	if del {
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("deleting stream %s: %w", name, err)
		}
		fmt.Printf("stream %s deleted\n", name)
		return nil
	}
	if _, err := js.Stream(ctx, name); err == nil {
		fmt.Printf("stream %s exists\n", name)
		return nil
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("looking up stream %s: %w", name, err)
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     name,
		Subjects: subjects,
		Storage:  jetstream.FileStorage,
		MaxAge:   24 * time.Hour,
	})
	if err != nil {
		return fmt.Errorf("creating stream %s for %s: %w", name, strings.Join(subjects, ","), err)
	}
	fmt.Printf("stream %s created\n", name)
	return nil
}
