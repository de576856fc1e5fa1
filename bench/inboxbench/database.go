package inboxbench

import (
	"context"
	"fmt"
	"net/url"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/machine"
)

// benchDatabase is the private database of one bench run (see benchdb), with the statements
// of this bench.
type benchDatabase struct {
	*benchdb.Database
}

// createDatabase creates and migrates the bench database.
func createDatabase(ctx context.Context, server string) (*benchDatabase, error) {
	db, err := benchdb.Create(ctx, server, 2, logf)
	if err != nil {
		return nil, err
	}
	return &benchDatabase{db}, nil
}

// inboxCounts returns the number of inbox rows of the source and the number of distinct
// idempotency keys among them.
func (db *benchDatabase) inboxCounts(ctx context.Context, source string) (rows, distinct int, err error) {
	err = db.Admin.QueryRow(ctx, `SELECT count(*)::int, count(DISTINCT idempotency_key)::int FROM inbox WHERE source = $1`, source).Scan(&rows, &distinct)
	if err != nil {
		return 0, 0, fmt.Errorf("counting inbox rows: %w", err)
	}
	return rows, distinct, nil
}

// backendCPU returns the user + system seconds of each server process connected to the bench
// database, read from /proc, by process id.
func (db *benchDatabase) backendCPU(ctx context.Context) map[int]float64 {
	out := map[int]float64{}
	pids, err := db.BackendPIDs(ctx)
	if err != nil {
		return out
	}
	for _, p := range pids {
		out[p] = machine.ProcessCPU(p)
	}
	return out
}

// userPassword returns the user and password of a URL, for database.username and
// database.password.
func userPassword(raw string) (user, password string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return "", "", false
	}
	p, _ := u.User.Password()
	return u.User.Username(), p, true
}
