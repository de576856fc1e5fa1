package outboxbench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/alternayte/queuebox/shared/tracing"
	"github.com/alternayte/queuebox/shared/tracing/otlp"
)

// startTracing builds the tracer provider of a run with tracing on, at 100 % sampling. target
// "local" starts an OTLP/HTTP receiver on a loopback port in this process that reads and
// discards every export, so that the run measures what QueueBox spends on its spans and their
// export, not a collector; any other value is the OTLP endpoint's URL. stop flushes the spans
// and stops the receiver.
func startTracing(ctx context.Context, target string) (*tracing.Provider, func(), error) {
	endpoint := target
	stopReceiver := func() {}
	if target == "local" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("listening for the OTLP receiver: %w", err)
		}
		srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			// An empty body is an empty ExportTraceServiceResponse: every span accepted.
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK)
		})}
		go func() { _ = srv.Serve(ln) }()
		endpoint = "http://" + ln.Addr().String()
		stopReceiver = func() { _ = srv.Close() }
	}
	one := 1.0
	tp, err := otlp.New(ctx, tracing.Config{Endpoint: endpoint, SampleRatio: &one, ServiceName: "outboxbench"})
	if err != nil {
		stopReceiver()
		return nil, nil, fmt.Errorf("starting tracing: %w", err)
	}
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
		stopReceiver()
	}, nil
}
