package sqlserver

import (
	"strconv"

	"github.com/alternayte/queuebox/shared/dburl"
	"github.com/alternayte/queuebox/shared/store"
)

// Dialect is SQL Server's line of the dialect table (shared/store/dialect): database.type
// sqlserver, the schema dbo, key columns of NVARCHAR (UTF-16 code units), and change data
// capture (outbox.capture.mode sqlserver-cdc, shared/store/sqlserver/cdc).
var Dialect = store.Dialect{
	Name:               store.DialectSQLServer,
	ParseURL:           ParseURL,
	Params:             Params,
	ConnString:         ConnString,
	EndpointConnString: EndpointConnString,
	Open:               Open,
	OpenHealth:         OpenHealth,
	DefaultSchema:      "dbo",
	CaptureMode:        "sqlserver-cdc",
	UTF16Keys:          true,
}

// EndpointConnString returns the go-mssqldb URL of an endpoint, with its encrypt and
// TrustServerCertificate; the parameters of database.url are not carried. It holds the
// password: never log it.
func EndpointConnString(e store.Endpoint) string {
	return BuildURL(e.Host, "", e.User, e.Password, e.Database, []dburl.Param{
		{Name: "encrypt", Value: strconv.FormatBool(e.Encrypt)},
		{Name: "TrustServerCertificate", Value: strconv.FormatBool(e.TrustServerCertificate)},
	})
}
