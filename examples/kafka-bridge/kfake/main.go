// Command kfake runs an in-process Kafka broker (franz-go's kfake) on a fixed local port with
// the example's topic, until it receives SIGINT or SIGTERM. The kafka-bridge example starts it
// because no Kafka broker runs on this machine; a real broker works the same way.
//
//	kfake -port 19092 -topic orders -partitions 1
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 19092, "the port on 127.0.0.1")
	topic := flag.String("topic", "orders", "the topic to create (a comma-separated list for several)")
	partitions := flag.Int("partitions", 1, "the partitions of each topic")
	flag.Parse()

	topics := strings.Split(*topic, ",")
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.Ports(*port),
		kfake.SeedTopics(int32(*partitions), topics...),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake: starting a broker on 127.0.0.1:%d: %v\n", *port, err)
		os.Exit(1)
	}
	fmt.Printf("kfake: a Kafka broker on %s with topic %s (%d partition(s)); stop it with Ctrl-C\n",
		strings.Join(c.ListenAddrs(), ","), strings.Join(topics, ","), *partitions)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	c.Close()
}
