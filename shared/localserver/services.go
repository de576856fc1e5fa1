package localserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/alternayte/queuebox/shared/lifecycle"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/relay"
	"github.com/alternayte/queuebox/shared/service"
)

// services returns the services of the process in their stages (lifecycle.Group):
//
//  1. the workers: the outbox poller, the retention cleanup (retention.enabled), capture
//     (outbox.capture.enabled) and the inbox relay (inbox.relay.enabled); they stop last, at
//     the same time, each within its own shutdown timeout;
//  2. the HTTP servers of servers, which report a failure to serve on serveErr and drain for
//     up to HTTPDrainTimeout when they stop;
//  3. the broker sources (spec/07), which consume into the inbox: they start last and stop
//     first, so that nothing new arrives while the rest finishes.
func (l *Local) services(servers []server, serveErr chan<- error) *lifecycle.Group {
	a := l.app
	workers := []lifecycle.Service{pollerService(a.Outbox.Poller, l.log)}
	if a.Cleaner.Enabled() {
		workers = append(workers, lifecycle.NewLoop(func(ctx context.Context) {
			if err := a.Cleaner.Run(ctx); err != nil {
				l.log.Error("retention cleanup stopped", "error", err)
			}
		}))
	}
	if a.Capture != nil {
		workers = append(workers, lifecycle.NewLoop(func(ctx context.Context) {
			_ = a.Capture.Run(ctx) // it logs a fault; delivery goes on through SQL
		}))
	}
	if a.Relay != nil {
		workers = append(workers, relayService(a.Relay, l.log))
	}
	var g lifecycle.Group
	g.Add(workers...)
	g.Add(serveService(servers, serveErr, l.log))
	if a.Sources != nil {
		g.Add(service.SourcesService(a.Sources, a.DB.Store, l.log))
	}
	return &g
}

// pollerService runs the outbox poller until it stops, and logs its summary then.
func pollerService(p *outbox.Poller, log *slog.Logger) lifecycle.Service {
	return lifecycle.NewLoop(func(ctx context.Context) {
		sum := p.Run(ctx, outbox.RunOptions{})
		log.Info("outbox poller stopped", "sent", sum.Sent, "retried", sum.Retried, "dead", sum.Dead, "claims_lost", sum.ClaimsLost,
			"lease_expired", sum.LeaseExpired)
	})
}

// relayService runs the inbox relay until it stops, and logs its summary then.
func relayService(r *relay.Relay, log *slog.Logger) lifecycle.Service {
	return lifecycle.NewLoop(func(ctx context.Context) {
		sum := r.Run(ctx, relay.RunOptions{})
		log.Info("inbox relay stopped", "forwarded", sum.Forwarded, "dead", sum.Dead, "claims_lost", sum.ClaimsLost,
			"lease_expired", sum.LeaseExpired)
	})
}

// serveService serves every server; a server that fails to serve reports it on serveErr. At
// its stop the servers refuse new requests and drain those in flight for up to
// HTTPDrainTimeout.
func serveService(servers []server, serveErr chan<- error, log *slog.Logger) lifecycle.Service {
	return lifecycle.NewLoop(func(ctx context.Context) {
		for _, s := range servers {
			go func() {
				if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					serveErr <- fmt.Errorf("serving %s: %w", s.ln.Addr(), err)
				}
			}()
		}
		<-ctx.Done()
		drainCtx, cancel := context.WithTimeout(context.Background(), HTTPDrainTimeout)
		defer cancel()
		for _, s := range servers {
			if err := s.srv.Shutdown(drainCtx); err != nil {
				log.Warn("HTTP server did not drain in time", "address", s.ln.Addr().String(), "error", err)
			}
		}
	})
}
