package storetest

import (
	"strings"
	"testing"
)

func schemaTests() []testCase {
	return []testCase{
		{name: "PingAndCheckSchema", custom: true, run: testPingAndCheckSchema},
		{name: "CheckSchemaNamesMissingColumns", run: testCheckSchemaNamesMissingColumns},
	}
}

func testPingAndCheckSchema(t *testing.T, e *env) {
	if err := e.s.Ping(e.ctx); err != nil {
		t.Fatalf("pinging: %v", err)
	}
	if err := e.s.CheckSchema(e.ctx); err != nil {
		t.Fatalf("checking a complete schema: %v", err)
	}
}

func testCheckSchemaNamesMissingColumns(t *testing.T, e *env) {
	s, _ := e.open(t, SchemaCustomIncomplete)
	err := s.CheckSchema(e.ctx)
	if err == nil {
		t.Fatal("checking a schema without inbox headers and outbox sequence: got no error")
	}
	msg := err.Error()
	for _, want := range []string{"qb_inbox", "headers", "qb_outbox", "sequence", "ALTER TABLE"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Count(msg, "ALTER TABLE") < 2 {
		t.Errorf("error %q carries fewer than two ALTER TABLE statements", msg)
	}
}
