package sqlserver

// The statements and the lock rule of the migration backend, for the migration tests of
// package sqlserver_test.
const (
	MSSessionSettings    = msSessionSettings
	MSGetLock            = msGetLock
	MSReleaseLock        = msReleaseLock
	MSHistoryExists      = msHistoryExists
	MSCreateHistory      = msCreateHistory
	MSCreateHistoryIndex = msCreateHistoryIndex
	MSReadHistory        = msReadHistory
	MSInsertHistory      = msInsertHistory
	MSTableExists        = msTableExists
)

// LockResult is lockResult.
var LockResult = lockResult
