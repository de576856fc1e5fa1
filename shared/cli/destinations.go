package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alternayte/queuebox/shared/admin"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store"
)

// withDestinations loads the configuration, connects to its database and calls f with the
// configured destinations, and returns f's exit code. It prints a failure to load or connect
// itself and returns ExitFailure.
func withDestinations(ctx context.Context, env Env, f func(admin.Destinations) int) int {
	cfg, db, ok := connect(ctx, env, slog.LevelWarn)
	if !ok {
		return ExitFailure
	}
	defer db.Close()
	return f(admin.Destinations{States: db.Store, Names: service.DestinationNames(cfg)})
}

// destinationsList prints the state of every configured destination, one a line, or as the
// JSON array of GET /admin/destinations.
func destinationsList(ctx context.Context, env Env, asJSON bool) int {
	return withDestinations(ctx, env, func(d admin.Destinations) int {
		list, err := d.List(ctx)
		if err != nil {
			printStateError(env.Stderr, "read the destination state", err)
			return ExitFailure
		}
		if asJSON {
			if list == nil {
				list = []admin.DestinationStatus{}
			}
			writeJSONTo(env.Stdout, list)
			return ExitOK
		}
		if len(list) == 0 {
			fmt.Fprintln(env.Stderr, "No destination is configured.")
			return ExitOK
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DESTINATION\tPAUSED\tCIRCUIT\tOPEN REMAINING\tFAILURES")
		for _, s := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", s.Name, pausedText(s), s.Circuit, remainingText(s), s.Failures)
		}
		_ = tw.Flush()
		return ExitOK
	})
}

// destinationsSetPaused pauses or resumes one destination and prints its new state.
func destinationsSetPaused(ctx context.Context, env Env, name string, paused, asJSON bool) int {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	return withDestinations(ctx, env, func(d admin.Destinations) int {
		s, err := d.SetPaused(ctx, name, paused)
		switch {
		case errors.Is(err, admin.ErrUnknownDestination):
			known := "none is configured"
			if len(d.Names) > 0 {
				known = "the configured destinations are " + strings.Join(d.Names, ", ")
			}
			fmt.Fprintf(env.Stderr, "QueueBox could not %s destination %q. Reason: no destination has this name (%s).\n", verb, name, known)
			return ExitFailure
		case err != nil:
			printStateError(env.Stderr, fmt.Sprintf("%s destination %q", verb, name), err)
			return ExitFailure
		}
		if asJSON {
			writeJSONTo(env.Stdout, s)
			return ExitOK
		}
		if s.Paused {
			fmt.Fprintf(env.Stdout, "Destination %s is paused (since %s): its rows wait, their attempts unchanged, until `queuebox destinations resume %s`.\n",
				s.Name, s.PausedAt.UTC().Format(time.RFC3339), s.Name)
		} else {
			fmt.Fprintf(env.Stdout, "Destination %s is resumed: its rows are delivered again (circuit %s).\n", s.Name, s.Circuit)
		}
		return ExitOK
	})
}

// printStateError prints a failed read or write of the destination state.
func printStateError(w io.Writer, what string, err error) {
	if errors.Is(err, store.ErrNoDestinationState) {
		fmt.Fprintf(w, "QueueBox could not %s. Reason: the table %s does not exist; apply QueueBox's own migration V1__add_destination_state.sql (queuebox migrate) first.\n",
			what, store.DestinationStateTable)
		return
	}
	fmt.Fprintf(w, "QueueBox could not %s. Reason: %s\n", what, redact.Error(err))
}

func pausedText(s admin.DestinationStatus) string {
	switch {
	case !s.Paused:
		return "no"
	case s.PausedAt == nil:
		return "yes"
	}
	return "since " + s.PausedAt.UTC().Format(time.RFC3339)
}

func remainingText(s admin.DestinationStatus) string {
	if s.OpenRemainingMs <= 0 {
		return "-"
	}
	d := time.Duration(s.OpenRemainingMs) * time.Millisecond
	if d < time.Second {
		return d.String()
	}
	return d.Round(time.Second).String()
}
