package sqlserver

import "github.com/alternayte/queuebox/migrations"

// The statements and the lock rule of the migration backend, for the migration tests of
// package sqlserver_test.
const (
	MSSessionSettings = msSessionSettings
	MSGetLock         = msGetLock
	MSReleaseLock     = msReleaseLock
	MSTableExists     = msTableExists
	MSMoveInsert      = msMoveInsert
	MSMoveDelete      = msMoveDelete
)

// The statements of each track's history table.
var (
	MSHistoryExists      = msHistoryExists
	MSCreateHistory      = msCreateHistory
	MSCreateHistoryIndex = msCreateHistoryIndex
	MSReadHistory        = msReadHistory
	MSInsertHistory      = msInsertHistory

	MSQueueBoxHistoryExists      = msHistories[migrations.QueueBox].exists
	MSQueueBoxCreateHistory      = msHistories[migrations.QueueBox].create
	MSQueueBoxCreateHistoryIndex = msHistories[migrations.QueueBox].createIndex
	MSQueueBoxReadHistory        = msHistories[migrations.QueueBox].read
	MSQueueBoxInsertHistory      = msHistories[migrations.QueueBox].insert
)

// LockResult is lockResult.
var LockResult = lockResult
