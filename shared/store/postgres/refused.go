package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/alternayte/queuebox/shared/store"
)

// Refused classifies an error of a connection attempt: the database's answer to a login it
// refuses (SQLSTATE class 28: 28000 invalid authorization, such as a role that does not exist,
// and 28P01, a wrong password) and to a database that does not exist (3D000) are refusals that
// waiting does not change; it returns nil for every other error (the server not listening yet,
// starting up, too many connections), which the start retries.
func Refused(err error) *store.RefusedError {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return nil
	}
	switch pgErr.Code {
	case "28000", "28P01":
		return store.NewRefusedError("the database refused the login (SQLSTATE "+pgErr.Code+")",
			"check database.username and database.password (and the server's pg_hba.conf)", err)
	case "3D000":
		return store.NewRefusedError("the database does not exist (SQLSTATE 3D000)",
			"create it, or correct the database name in database.url", err)
	}
	return nil
}
