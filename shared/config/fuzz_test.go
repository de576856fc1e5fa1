package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fuzzSecretFile is the secret file that the fuzzed configurations may name with file:.
const fuzzSecretFile = "/run/secrets/fuzz"

// FuzzLoad loads any YAML document with any QUEUEBOX_ variables (lines KEY=VALUE), the way
// serve and config check do (Load with an environment map and in-memory files). The harness
// adds a secret through every way one arrives: QUEUEBOX_DATABASE_PASSWORD,
// QUEUEBOX_ADMIN_AUTH_TOKEN, the password of QUEUEBOX_DATABASE_URL and the content of a file:
// reference. The properties: Load never panics; it is deterministic (the same problems and
// warnings in the same order); no error, problem or warning holds the secret; and a loaded
// configuration never shows it in MaskedYAML, Summary, a %v / %+v / %#v format or a slog line.
func FuzzLoad(f *testing.F) {
	seeds := [][]byte{PackagedConfig(), []byte(minimalDatabase), []byte("")}
	if b, err := os.ReadFile("testdata/example-queuebox.yml"); err == nil {
		seeds = append(seeds, b)
	}
	fragments, _ := filepath.Glob("testdata/fragments/*.yml")
	for _, name := range fragments {
		if b, err := os.ReadFile(name); err == nil {
			seeds = append(seeds, b)
		}
	}
	env := "DB_PASSWORD=db-pass\nADMIN_TOKEN=admin-token\nORDERS_CLIENT_SECRET=orders-secret\nSTRIPE_WEBHOOK_SECRET=stripe-secret"
	for i, s := range seeds {
		f.Add(s, env, "s3cr3t", i%2 == 0, "jdbc:postgresql", "db:5432/queuebox")
	}
	f.Add([]byte(minimalDatabase+"admin:\n  enabled: true\n  auth:\n    type: bearer\n    token: file:"+fuzzSecretFile+"\n"),
		"QUEUEBOX_OUTBOX_POLLINTERVALMS=-1\nQUEUEBOX_NOPE=1", "abc", true, "postgres", "db/q?sslmode=nope")
	f.Add([]byte("database:\n  password: [1, 2]\n  url: ${MISSING}\nsources:\n  s:\n    type: http\n    path: /s\n    idempotencyKeyPath: id\n"+
		"    auth:\n      type: standard-webhooks\n      secret: file:"+fuzzSecretFile+"\n"), "", "not~base64!", false, "jdbc:sqlserver", "db;databaseName=q")
	f.Add([]byte(minimalDatabase+"destinations:\n  web:\n    baseUrl: https://example.com\n    signing:\n      secrets:\n        - file:"+fuzzSecretFile+"\n"+
		"        - whsec_short\n  gh:\n    baseUrl: https://example.com\n    signing:\n      type: hmac\n      secret: file:"+fuzzSecretFile+"\n"), "", "whsecabc", false, "", "")
	f.Add([]byte("a: &a [*a]\n"), "", "x", false, "", "")
	f.Add([]byte("a: &a ["+strings.Repeat("*a,", 50)+"*a]\nb: &b ["+strings.Repeat("*a,", 50)+"*a]\n"), "", "x", false, "", "")
	f.Add([]byte(strings.Repeat("[", 10000)), "", "x", false, "", "")
	f.Add([]byte(strings.Repeat("a:\n ", 5000)), "", "x", false, "", "")
	f.Fuzz(func(t *testing.T, doc []byte, envText, secret string, urlSecret bool, urlScheme, urlRest string) {
		if len(doc) > 64<<10 || len(envText) > 16<<10 {
			return // a configuration is a few kilobytes; keep each input quick
		}
		// The secret: a distinctive prefix and letters and digits, so that it fits every place.
		s := "fz0" + strings.Map(func(r rune) rune {
			if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return r
			}
			return -1
		}, secret)
		s = s[:min(len(s), 40)]
		if len(s) < 6 || bytes.Contains(doc, []byte(s)) || strings.Contains(envText, s) ||
			strings.Contains(urlScheme+urlRest, s) {
			return // the secret must not also be some other value of the input
		}
		env := EnvMap(strings.Split(envText, "\n"))
		env["QUEUEBOX_DATABASE_PASSWORD"] = s
		env["QUEUEBOX_ADMIN_AUTH_TOKEN"] = s
		if urlSecret {
			env["QUEUEBOX_DATABASE_URL"] = urlScheme + "://user:" + s + "@" + urlRest
		}
		files := memFiles{DefaultConfigFile: string(doc), fuzzSecretFile: s + "\n"}
		opts := LoadOptions{Components: testComponents(), Env: env, ReadFile: files.read}

		cfg, warnings, err := Load(opts)
		cfg2, warnings2, err2 := Load(opts)
		if fmt.Sprint(err) != fmt.Sprint(err2) || !slices.Equal(warningStrings(warnings), warningStrings(warnings2)) ||
			(cfg == nil) != (cfg2 == nil) {
			t.Fatalf("Load is not deterministic:\n%v\n%v\nthen\n%v\n%v", err, warningStrings(warnings), err2, warningStrings(warnings2))
		}
		leak := func(what, text string) {
			if strings.Contains(text, s) {
				t.Fatalf("%s holds the secret %q:\n%s", what, s, text)
			}
		}
		for _, w := range warnings {
			leak("a warning", w.Message+" "+w.Key+" "+w.Origin)
		}
		if err != nil {
			leak("the error", err.Error())
			leak("the error as %+v", fmt.Sprintf("%+v %#v", err, err))
			if cfg != nil {
				t.Fatalf("Load returned a configuration and the error %v", err)
			}
			return
		}
		masked, err := cfg.MaskedYAML()
		if err != nil {
			t.Fatalf("MaskedYAML of a loaded configuration: %v", err)
		}
		leak("MaskedYAML", string(masked))
		leak("Summary", cfg.Summary())
		leak("the formatted configuration", fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg.Origin))
		var line bytes.Buffer
		slog.New(slog.NewTextHandler(&line, nil)).Info("config", slog.Any("config", cfg))
		slog.New(slog.NewJSONHandler(&line, nil)).Info("config", slog.Any("config", cfg))
		leak("a slog line", line.String())
	})
}

// TestSQLServerJDBCURLWithUserInfoHidesThePassword is the crasher of FuzzLoad
// (testdata/fuzz/FuzzLoad/a56511c437972a09): a jdbc:sqlserver:// URL takes no user:password@
// before the host, so user:secret@db was read as the host "user" with the port "secret@db",
// and the error quoted that port, the password with it.
func TestSQLServerJDBCURLWithUserInfoHidesThePassword(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"jdbc:sqlserver://user:Pa55word@db:1433;databaseName=q", "jdbc:sqlserver://user:Pa55word@db",
		"jdbc:sqlserver://;serverName=user:Pa55word@db"} {
		_, err := testComponents().ParseDatabaseURL(raw)
		if err == nil || strings.Contains(err.Error(), "Pa55word") || !strings.Contains(err.Error(), "database.password") {
			t.Errorf("ParseDatabaseURL(%q) = %v, want an error that names database.password and not the password", raw, err)
		}
	}
}
