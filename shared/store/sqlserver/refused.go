package sqlserver

import (
	"errors"
	"strconv"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/alternayte/queuebox/shared/store"
)

// errLoginFailed is SQL Server's "Login failed for user": an unknown login or a wrong
// password, a refusal that waiting does not change. Error 4060 ("Cannot open database
// requested by the login") is not one: SQL Server also answers it while a database recovers
// after a restart or fails over, so the start waits it out like any other error.
const errLoginFailed = 18456

// Refused classifies an error of a connection attempt: a failed login (error 18456) is a
// refusal that waiting does not change; it returns nil for every other error, which the start
// retries.
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
	}
	return nil
}
