package forwarded_test

import (
	"testing"

	"github.com/alternayte/queuebox/shared/forwarded"
)

func TestIsRelayed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		headers map[string]string
		want    bool
	}{
		{name: "nil", headers: nil, want: false},
		{name: "both markers", headers: map[string]string{"x-inbox-id": "i", "x-source": "s"}, want: true},
		{name: "both markers in another letter case", headers: map[string]string{"X-Inbox-Id": "i", "X-SOURCE": "s", "a": "b"}, want: true},
		{name: "x-source alone", headers: map[string]string{"x-source": "billing", "x-team": "t"}, want: false},
		{name: "x-inbox-id alone", headers: map[string]string{"x-inbox-id": "i", "x-team": "t"}, want: false},
	}
	for _, tt := range tests {
		if got := forwarded.IsRelayed(tt.headers); got != tt.want {
			t.Errorf("%s: IsRelayed = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestGuardDrops(t *testing.T) {
	t.Parallel()
	g := forwarded.NewGuard("X-Message-Id", "x-team", "").WithPrefix("Nats-")
	for name, want := range map[string]bool{
		"x-message-id": true, "X-TEAM": true, "nats-rollup": true, "Nats-Msg-Id": true,
		"Host": true, "content-length": true, "Transfer-Encoding": true, "connection": true, "TE": true,
		"upgrade": true, "Keep-Alive": true, "trailer": true, "Proxy-Authorization": true, "proxy-anything": true,
		"x-github-event": false, "x-natsy": false, "x-teams": false, "": false, "Content-Type": false,
	} {
		if got := g.Drops(name); got != want {
			t.Errorf("Drops(%q) = %v, want %v", name, got, want)
		}
	}
	var zero forwarded.Guard
	if !zero.Drops("Connection") || zero.Drops("X-Team") {
		t.Error("the zero Guard must drop the hop-by-hop headers only")
	}
}

func TestValidName(t *testing.T) {
	for _, name := range []string{"X-Team", "x_team", "A1", "!#$%&'*+-.^_`|~"} {
		if !forwarded.ValidName(name) {
			t.Errorf("forwarded.ValidName(%q) = false, want true", name)
		}
	}
	for _, name := range []string{"", "X Team", "X:Team", "X-Té", "X\x00", "(x)", "a/b"} {
		if forwarded.ValidName(name) {
			t.Errorf("forwarded.ValidName(%q) = true, want false", name)
		}
	}
}
