package sqlserver

import (
	"context"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// OpenHealth opens a lazy pool: it connects on a ping, not when it opens, and a ping of an
// address where nothing listens fails within the connect timeout.
func TestOpenHealthIsLazy(t *testing.T) {
	t.Parallel()
	drv, err := OpenHealth(context.Background(), store.OpenConfig{
		ConnString: "sqlserver://sa:secret@127.0.0.1:1?database=queuebox", PoolSize: 1, ConnectTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatalf("OpenHealth: %v", err)
	}
	defer drv.Close()
	if got := drv.PoolStats(); got.Max != 1 || got.Active != 0 {
		t.Errorf("pool stats %+v, want Max 1 and nothing open", got)
	}
	if err := drv.Ping(context.Background()); err == nil {
		t.Error("a ping of 127.0.0.1:1 succeeded")
	}
	if _, err := OpenHealth(context.Background(), store.OpenConfig{ConnString: "sqlserver://[::1"}); err == nil {
		t.Error("OpenHealth took a URL that does not parse")
	}
}
