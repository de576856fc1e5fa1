package specsql

import (
	"reflect"
	"testing"
)

func TestCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		block string
		want  []Command
	}{
		{
			name:  "collapsed clone, cd and compose",
			block: "git clone https://github.com/alternayte/queuebox.git cd queuebox docker compose -f docker-compose.yml --env-file .env.example up -d --build",
			want: []Command{
				{Line: "git clone https://github.com/alternayte/queuebox.git"},
				{Line: "cd queuebox"},
				{Line: "docker compose -f docker-compose.yml --env-file .env.example up -d --build"},
			},
		},
		{
			name:  "exec runs psql with a here-document",
			block: "docker compose -f docker-compose.yml exec -T postgres psql -U queuebox -d queuebox <<'SQL' BEGIN; INSERT INTO outbox (topic) VALUES ('order.created'); COMMIT; SQL",
			want: []Command{{
				Line:    "docker compose -f docker-compose.yml exec -T postgres psql -U queuebox -d queuebox <<'SQL'",
				Heredoc: "BEGIN; INSERT INTO outbox (topic) VALUES ('order.created'); COMMIT;",
				Tag:     "SQL",
			}},
		},
		{
			name:  "line continuations whose breaks were lost",
			block: `curl -i -X POST http://localhost:8080/inbox/orders \ -H 'Content-Type: application/json' \ -d '{"id":"order-1","total":42}'`,
			want:  []Command{{Line: `curl -i -X POST http://localhost:8080/inbox/orders -H 'Content-Type: application/json' -d '{"id":"order-1","total":42}'`}},
		},
		{
			name:  "intact lines",
			block: "go mod tidy\ngo run .",
			want:  []Command{{Line: "go mod tidy"}, {Line: "go run ."}},
		},
		{
			name:  "&& keeps a command whole",
			block: "mkdir orders-worker && cd orders-worker npm init -y npm pkg set type=module",
			want:  []Command{{Line: "mkdir orders-worker && cd orders-worker"}, {Line: "npm init -y"}, {Line: "npm pkg set type=module"}},
		},
		{
			name:  "a command after a here-document",
			block: "cat >> a.yml <<'YAML' orders: type: http YAML docker compose up -d",
			want:  []Command{{Line: "cat >> a.yml <<'YAML'", Heredoc: "orders: type: http", Tag: "YAML"}, {Line: "docker compose up -d"}},
		},
	}
	for _, tt := range tests {
		got, err := Commands(tt.block)
		if err != nil {
			t.Errorf("%s: Commands: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Commands =\n%q\nwant\n%q", tt.name, got, tt.want)
		}
	}
	for _, bad := range []string{"cat <<'SQL' SELECT 1;", `curl -d '{"a":1}`} {
		if _, err := Commands(bad); err == nil {
			t.Errorf("Commands(%q) succeeded, want an error", bad)
		}
	}
}

func TestBlocks(t *testing.T) {
	t.Parallel()
	page := "a\n```bash\ncurl x\n```\n text ```sql\nSELECT 1;\n```\n```bash\ngo run .\n```\n"
	if got := Blocks(page, "bash"); !reflect.DeepEqual(got, []string{"curl x", "go run ."}) {
		t.Errorf("Blocks(bash) = %q", got)
	}
	if got := Blocks(page, "sql"); !reflect.DeepEqual(got, []string{"SELECT 1;"}) {
		t.Errorf("Blocks(sql) = %q", got)
	}
}
