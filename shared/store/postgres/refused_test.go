package postgres

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestRefusedClassifiesTheSQLStates(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{
		"28000": true, "28P01": true, "3D000": true,
		"57P03": false, // cannot_connect_now: the server is starting
		"53300": false, // too_many_connections
		"08006": false, // connection_failure
	} {
		err := fmt.Errorf("failed to connect: %w", &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"})
		if got := Refused(err) != nil; got != want {
			t.Errorf("Refused(SQLSTATE %s) = %v, want %v", code, got, want)
		}
	}
	if Refused(fmt.Errorf("dial tcp: connection refused")) != nil {
		t.Error("a refused TCP connection is not a refused login")
	}
}
