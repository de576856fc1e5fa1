package service

import (
	"context"
	"log/slog"

	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/lifecycle"
)

// SourcesService runs the broker sources of a program as one lifecycle.Service, storing
// through sink. At its stop they stop consuming, and a batch whose store began is finished and
// acknowledged, within SourceStopTimeout; a source that does not stop in time is logged.
func SourcesService(srcs SourceGroup, sink inbox.Inserter, log *slog.Logger) lifecycle.Service {
	return lifecycle.NewLoop(func(ctx context.Context) {
		srcs.Start(ctx, sink)
		<-ctx.Done()
		if !srcs.Stop(SourceStopTimeout) {
			log.Warn("a broker source did not stop in time", "timeout", SourceStopTimeout.String())
		}
	})
}
