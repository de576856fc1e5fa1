package cdc_test

import (
	"bytes"
	"context"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/alternayte/queuebox/shared/store/sqlserver"
	"github.com/alternayte/queuebox/shared/store/sqlserver/cdc"
	"github.com/alternayte/queuebox/shared/store/sqlserver/sqlservertest"
)

// fakeServer is SQL Server with change data capture as the source sees it through its
// statements: the database and table switches, the capture instances, the change table of the
// outbox (each change an LSN and an __$operation), the newest LSN of the database, the oldest
// LSN that the capture instance keeps, the application locks of the sessions and
// queuebox_capture_state. It answers the statements of package cdc and sqlserver.CaptureState
// through a sqlservertest.FakeDB, and refuses any other statement, so a test also proves that
// the source runs no statement it does not declare.
type fakeServer struct {
	db *sqlservertest.FakeDB

	mu         sync.Mutex
	dbEnabled  bool
	tableFound bool
	tracked    bool
	canSelect  bool
	user       string
	database   string
	instances  []fakeInstance
	minLSN     uint64 // the oldest LSN that the capture instance keeps; 0: the instance is gone
	maxLSN     uint64 // the newest LSN of the database (sys.fn_cdc_get_max_lsn); 0: NULL
	changes    []fakeChange
	lockHolder int // the connection that holds the identity's lock; 0: none
	states     map[string][2]string
	polls      int
	failPolls  int // the next polls that fail, as on a lost connection
}

type fakeInstance struct {
	name     string
	startLSN uint64
}

type fakeChange struct {
	lsn uint64
	op  int64 // __$operation: 1 delete, 2 insert, 3 and 4 update
}

// newFakeServer returns a server on which every start check passes: CDC on the database and
// on dbo.outbox, the capture instance dbo_outbox from LSN 100, the newest LSN 100.
func newFakeServer() *fakeServer {
	s := &fakeServer{
		dbEnabled: true, tableFound: true, tracked: true, canSelect: true,
		user: "capture_user", database: "queuebox",
		instances: []fakeInstance{{name: "dbo_outbox", startLSN: 100}},
		minLSN:    100, maxLSN: 100,
		states: map[string][2]string{},
	}
	s.db = &sqlservertest.FakeDB{Answer: s.answer}
	return s
}

// source returns the cdc source on the fake server, polling every 5 ms.
func (s *fakeServer) source() *cdc.Source {
	return &cdc.Source{
		PollInterval: 5 * time.Millisecond,
		Connector:    func(string) (driver.Connector, error) { return s.db, nil },
	}
}

// lsn returns the binary(10) LSN of n: two zero bytes, then n big-endian.
func lsn(n uint64) []byte {
	b := make([]byte, 10)
	binary.BigEndian.PutUint64(b[2:], n)
	return b
}

// lsnValue reads a binary(10) LSN of lsn.
func lsnValue(b []byte) uint64 {
	if len(b) != 10 {
		panic(fmt.Sprintf("an LSN of %d bytes", len(b)))
	}
	return binary.BigEndian.Uint64(b[2:])
}

// lsnText is an LSN as offsets.dat writes it.
func lsnText(n uint64) string { return fmt.Sprintf("0x0000%016X", n) }

// commit adds changes at the LSN at, and makes at the newest LSN of the database, as the
// capture job does at the end of a scan.
func (s *fakeServer) commit(at uint64, ops ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range ops {
		s.changes = append(s.changes, fakeChange{lsn: at, op: op})
	}
	s.maxLSN = at
}

func (s *fakeServer) set(f func(s *fakeServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *fakeServer) answer(conn int, query string, args []any) sqlservertest.Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	row := func(vals ...any) sqlservertest.Answer { return sqlservertest.Answer{Rows: [][]any{vals}} }
	nullable := func(n uint64) any {
		if n == 0 {
			return nil
		}
		return lsn(n)
	}
	switch {
	case query == cdc.StmtLock:
		if s.lockHolder != 0 && s.lockHolder != conn && s.db.Open(s.lockHolder) {
			return row(int64(-1))
		}
		s.lockHolder = conn
		return row(int64(0))
	case query == cdc.StmtCheck:
		var tracked, canSelect any
		if s.tableFound {
			tracked = s.tracked
			canSelect = int64(0)
			if s.canSelect {
				canSelect = int64(1)
			}
		}
		return row(s.dbEnabled, tracked, canSelect, s.user, s.database)
	case query == cdc.StmtInstances:
		a := sqlservertest.Answer{Columns: []string{"source_schema", "source_table", "capture_instance", "object_id", "source_object_id",
			"start_lsn", "end_lsn", "supports_net_changes", "has_drop_pending", "role_name", "index_name", "filegroup_name",
			"create_date", "index_column_list", "captured_column_list"}}
		for _, in := range s.instances {
			a.Rows = append(a.Rows, []any{args[0], args[1], in.name, int64(1), int64(2), lsn(in.startLSN), nil, false, nil, nil,
				"PK_outbox", nil, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "[id]", "[id], [topic]"})
		}
		return a
	case query == cdc.StmtStart:
		from := lsnValue(args[1].([]byte))
		var next any
		if from != 0 {
			next = lsn(from + 1)
		}
		return row(s.instanceMin(args[0].(string)), nullable(s.maxLSN), next)
	case strings.HasPrefix(query, "DECLARE @qb_min"):
		s.polls++
		if s.failPolls > 0 {
			s.failPolls--
			return sqlservertest.Answer{Err: driver.ErrBadConn}
		}
		inst := args[0].(string)
		if query != cdc.StmtPoll(inst) {
			return sqlservertest.Answer{Err: fmt.Errorf("fake: the poll names another capture instance than %s", inst)}
		}
		from := lsnValue(args[1].([]byte))
		lo := s.minLSN
		if lsnValue(s.instanceMin(inst)) == 0 {
			lo = 0
		}
		first := lo
		if from != 0 {
			first = from + 1
		}
		if lo == 0 || s.maxLSN == 0 || first < lo || first > s.maxLSN {
			return row(nullable(lo), nullable(s.maxLSN), nullable(first), nil)
		}
		var n int64
		for _, c := range s.changes {
			if c.lsn >= first && c.lsn <= s.maxLSN && c.op == 2 {
				n++
			}
		}
		return row(lsn(lo), lsn(s.maxLSN), lsn(first), n)
	case query == sqlserver.CaptureStateExists:
		return row(int64(1))
	case query == sqlserver.CaptureStateRead:
		r, ok := s.states[args[0].(string)]
		if !ok {
			return sqlservertest.Answer{Columns: []string{"state_id", "config_fingerprint"}}
		}
		return row(r[0], r[1])
	case query == sqlserver.CaptureStateInsert:
		if _, ok := s.states[args[0].(string)]; ok {
			return sqlservertest.Answer{}
		}
		s.states[args[0].(string)] = [2]string{args[1].(string), args[2].(string)}
		return sqlservertest.Answer{RowsAffected: 1}
	}
	return sqlservertest.Answer{Err: fmt.Errorf("fake: unexpected statement %q", query)}
}

// instanceMin is what sys.fn_cdc_get_min_lsn answers for the capture instance: its oldest
// kept LSN, or ten zero bytes when it does not exist.
func (s *fakeServer) instanceMin(name string) []byte {
	for _, in := range s.instances {
		if in.name == name && s.minLSN != 0 {
			return lsn(s.minLSN)
		}
	}
	return make([]byte, 10)
}

// pollCount returns how many polls the server answered.
func (s *fakeServer) pollCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls
}

// statementNames names the statements that the connection conn ran, in order, merging
// repeated polls into one.
func (s *fakeServer) statementNames(conn int) []string {
	var out []string
	for _, e := range s.db.Statements() {
		if e.Conn != conn {
			continue
		}
		name := "?"
		switch {
		case e.Query == cdc.StmtLock:
			name = "lock"
		case e.Query == cdc.StmtCheck:
			name = "check"
		case e.Query == cdc.StmtInstances:
			name = "instances"
		case e.Query == cdc.StmtStart:
			name = "start"
		case strings.HasPrefix(e.Query, "DECLARE @qb_min"):
			name = "poll"
		case e.Query == sqlserver.CaptureStateExists:
			name = "state-exists"
		case e.Query == sqlserver.CaptureStateRead:
			name = "state-read"
		case e.Query == sqlserver.CaptureStateInsert:
			name = "state-insert"
		}
		if name == "poll" && len(out) > 0 && out[len(out)-1] == "poll" {
			continue
		}
		out = append(out, name)
	}
	return out
}

// startArgs returns the recorded position that each Start statement passed.
func (s *fakeServer) startArgs() [][]byte {
	var out [][]byte
	for _, e := range s.db.Statements() {
		if e.Query == cdc.StmtStart {
			out = append(out, bytes.Clone(e.Args[1].([]byte)))
		}
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(ctx context.Context, cond func() bool) bool {
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-time.After(2 * time.Millisecond):
		}
	}
}
