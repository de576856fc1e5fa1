package sqlserver

import (
	"errors"
	"strconv"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/alternayte/queuebox/shared/store"
)

// The SQL Server errors of a login that waiting does not change.
const (
	// errLoginFailed is "Login failed for user": an unknown login or a wrong password.
	errLoginFailed = 18456
	// errCannotOpenDatabase is "Cannot open database requested by the login": the database
	// does not exist, or the login may not use it.
	errCannotOpenDatabase = 4060
)

// Refused classifies an error of a connection attempt: a failed login (error 18456) and a
// database that the login cannot open (4060) are refusals that waiting does not change; it
// returns nil for every other error, which the start retries.
func Refused(err error) *store.RefusedError {
	e, ok := errors.AsType[mssql.Error](err)
	if !ok {
		p, okp := errors.AsType[*mssql.Error](err)
		if !okp || p == nil {
			return nil
		}
		e = *p
	}
	code := "SQL Server error " + strconv.Itoa(int(e.Number))
	switch e.Number {
	case errLoginFailed:
		return store.NewRefusedError("the database refused the login ("+code+")",
			"check database.username and database.password", err)
	case errCannotOpenDatabase:
		return store.NewRefusedError("the database cannot be opened by this login ("+code+"): it does not exist, or the login may not use it",
			"create it or grant the login access, or correct the databaseName of database.url", err)
	}
	return nil
}
