package sqlserver

import (
	"fmt"
	"testing"

	mssql "github.com/microsoft/go-mssqldb"
)

func TestRefusedClassifiesTheErrorNumbers(t *testing.T) {
	t.Parallel()
	for number, want := range map[int32]bool{18456: true, 4060: false, 40613: false, 1205: false} {
		e := mssql.Error{Number: number, Message: "login error: m"}
		if got := Refused(fmt.Errorf("ping: %w", e)) != nil; got != want {
			t.Errorf("Refused(%d) = %v, want %v", number, got, want)
		}
		if got := Refused(fmt.Errorf("ping: %w", &e)) != nil; got != want {
			t.Errorf("Refused(&%d) = %v, want %v", number, got, want)
		}
	}
	if Refused(fmt.Errorf("dial tcp: connection refused")) != nil {
		t.Error("a refused TCP connection is not a refused login")
	}
}
