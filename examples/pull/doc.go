// Package pull holds the SQL contract of a pull worker: the five statements under sql/ (claim,
// renew, complete, retry and dead, for PostgreSQL and SQL Server) that the pull-client
// libraries run, and the rules in README.md. The package has no API; its tests run the
// PostgreSQL statements against a migrated database with many concurrent workers and check
// the text of the SQL Server statements.
package pull
