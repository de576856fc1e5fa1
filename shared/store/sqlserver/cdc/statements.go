package cdc

import "strings"

// The statements of the SQL Server source. Placeholders are positional (@p1, @p2, ...) and
// T-SQL local variables carry the qb_ prefix, so that none shares a name with a bound
// parameter (Msg 134), as in shared/store/sqlserver.
const (
	// StmtLock takes the session lock of the identity (@p1, the resource name) without
	// waiting, owned by the session: the connection holds it until it closes. sp_getapplock
	// answers 0 or 1 when it granted the lock, -1 when another session holds it.
	StmtLock = `DECLARE @qb_result INT;
EXEC @qb_result = sys.sp_getapplock @Resource = @p1, @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = 0, @DbPrincipal = N'public';
SELECT @qb_result;`

	// StmtCheck reads, for the outbox table @p1 (its quoted two-part name): whether change
	// data capture is enabled on the database (sys.databases.is_cdc_enabled), whether it is
	// enabled on the table (sys.tables.is_tracked_by_cdc; NULL when the table does not exist
	// or the account cannot see it), whether the account may SELECT from the table (which
	// reading its change table needs), the database user and the database.
	StmtCheck = `SELECT d.is_cdc_enabled,
    (SELECT t.is_tracked_by_cdc FROM sys.tables AS t WHERE t.object_id = OBJECT_ID(@p1)),
    HAS_PERMS_BY_NAME(@p1, N'OBJECT', N'SELECT'),
    USER_NAME(),
    DB_NAME()
FROM sys.databases AS d
WHERE d.database_id = DB_ID();`

	// StmtInstances lists the capture instances of the table @p2 in the schema @p1 that the
	// account may read: a capture instance with a gating role that the account is not a
	// member of is left out. The source reads the columns capture_instance, start_lsn,
	// role_name, create_date and captured_column_list by name.
	StmtInstances = `EXEC sys.sp_cdc_help_change_data_capture @source_schema = @p1, @source_name = @p2;`

	// StmtStart reads the oldest position that the capture instance @p1 keeps, the newest
	// position of the database, and the position after @p2 (the recorded position; ten zero
	// bytes for none, which gives NULL).
	StmtStart = `SELECT sys.fn_cdc_get_min_lsn(@p1), sys.fn_cdc_get_max_lsn(),
    CASE WHEN @p2 = 0x00000000000000000000 THEN NULL ELSE sys.fn_cdc_increment_lsn(@p2) END;`
)

// StmtPoll returns the poll of the capture instance: with @p1 the capture instance and @p2
// the position read so far (ten zero bytes for none: read from the oldest position kept), it
// answers the oldest position kept, the newest position of the database, the first position
// to read, and the count of the inserts (__$operation = 2) from the first position to the
// newest. The count is NULL when there is nothing to read, or when the first position is no
// longer kept (the source then reports the fault of the retention window):
// cdc.fn_cdc_get_all_changes_<instance> fails for a range outside what the instance keeps.
func StmtPoll(instance string) string {
	return `DECLARE @qb_min BINARY(10) = sys.fn_cdc_get_min_lsn(@p1);
DECLARE @qb_to BINARY(10) = sys.fn_cdc_get_max_lsn();
DECLARE @qb_from BINARY(10) = CASE WHEN @p2 = 0x00000000000000000000 THEN @qb_min ELSE sys.fn_cdc_increment_lsn(@p2) END;
IF @qb_min IS NULL OR @qb_min = 0x00000000000000000000 OR @qb_to IS NULL OR @qb_from < @qb_min OR @qb_from > @qb_to
    SELECT @qb_min, @qb_to, @qb_from, CAST(NULL AS BIGINT);
ELSE
    SELECT @qb_min, @qb_to, @qb_from, COUNT_BIG(*)
    FROM cdc.` + quote("fn_cdc_get_all_changes_"+instance) + `(@qb_from, @qb_to, N'all')
    WHERE __$operation = 2;`
}

// EnableDB is the statement of spec/08-capture-changes.md that enables change data capture on
// the database.
const EnableDB = `EXEC sys.sp_cdc_enable_db;`

// EnableTable is the statement of spec/08-capture-changes.md that enables change data capture
// on the outbox table schema.table.
func EnableTable(schema, table string) string {
	return `EXEC sys.sp_cdc_enable_table @source_schema = ` + literal(schema) + `, @source_name = ` + literal(table) +
		`, @role_name = NULL, @supports_net_changes = 0;`
}

// quote returns name as a bracketed T-SQL identifier.
func quote(name string) string {
	return "[" + strings.ReplaceAll(name, "]", "]]") + "]"
}

// literal returns s as an N'...' T-SQL string literal.
func literal(s string) string {
	return "N'" + strings.ReplaceAll(s, "'", "''") + "'"
}
