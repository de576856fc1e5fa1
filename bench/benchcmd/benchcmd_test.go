package benchcmd

import "testing"

func TestServerURL(t *testing.T) {
	t.Setenv("QUEUEBOX_TEST_DATABASE_URL", "")
	if got := ServerURL(); got != DefaultServer {
		t.Fatalf("ServerURL() = %q, want the default %q", got, DefaultServer)
	}
	t.Setenv("QUEUEBOX_TEST_DATABASE_URL", "postgres://elsewhere/db")
	if got := ServerURL(); got != "postgres://elsewhere/db" {
		t.Fatalf("ServerURL() = %q, want the variable's value", got)
	}
}
