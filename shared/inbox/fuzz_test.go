package inbox_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/alternayte/queuebox/shared/filter"
	"github.com/alternayte/queuebox/shared/inboundauth"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// fuzzSecret is the hmac secret of the signed source of FuzzHandler.
const fuzzSecret = "fuzz-hmac-secret-0123456789"

// fuzzMaxBody is the body cap of FuzzHandler.
const fuzzMaxBody = 4096

// FuzzHandler sends any body with any headers to the real handler on a real database (one per
// fuzzing process), to an open source and to an hmac-signed one, and checks the answer
// against the processing order of spec/26: 413 exactly for a body above the cap; 401 exactly
// when the signature is not the MAC of the body, with a reason that holds neither the secret nor
// the signature; 202 filtered exactly when the excluded header is present; a correlation id
// that is the cleaned received one or a new UUID; 400 Invalid JSON only for a body that is not
// one JSON document (or that the database refuses); 400 for a missing idempotency key exactly
// when $.id holds no value; and a 202 messageId whose row holds the body, the key, the
// correlation id and the headers without the credential headers. Every answer is a JSON object.
func FuzzHandler(f *testing.F) {
	pool, _ := dbtest.Migrated(f)
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		f.Fatal(err)
	}
	a := inboundauth.NewConfig(inboundauth.KindHMAC)
	a.HMAC.Secret = inboundauth.NewSecret(fuzzSecret)
	a.HMAC.HeaderName = "X-Signature"
	a.HMAC.SignaturePrefix = "sha256="
	verifier, err := inboundauth.New(a)
	if err != nil {
		f.Fatal(err)
	}
	exclude := filter.Config{Exclude: []filter.Rule{{Header: "X-Test", Exists: new(true)}}}
	h, err := inbox.New(inbox.Options{
		MaxBodyBytes: fuzzMaxBody,
		Store:        st,
		Logger:       slog.New(slog.DiscardHandler),
		Sources: []inbox.Source{
			{Name: "open", Path: "/open", IdempotencyKeyPath: "$.id", EventTypePath: "$.type", AggregateIDPath: "$.data.id", Filter: exclude},
			{Name: "signed", Path: "/signed", IdempotencyKeyPath: "$['id']", Verifier: verifier, Consumption: "pull"},
		},
	})
	if err != nil {
		f.Fatal(err)
	}

	for _, body := range []string{`{"id":"evt_1","type":"order.created","data":{"id":"o-1"}}`, `{"id":12345678901234567890}`,
		`{"id":{"b":1,"a":[true,null]}}`, `{"id":null}`, `{"id":""}`, `{"type":"x"}`, `not json`, ``, `{"id":"a"} {}`,
		`{"id":"\u0000"}`, `{"id":"\ud800"}`, `{"id":"n","n":1e1000000}`, "{\"id\":\"\xff\"}", `{"id":"` + strings.Repeat("é", 256) + `"}`,
		strings.Repeat("[", 1001) + strings.Repeat("]", 1001), `{"id":"big","pad":"` + strings.Repeat("x", fuzzMaxBody) + `"}`} {
		f.Add(false, []byte(body), "corr-1", "X-Request-Id", "r", "Bearer t", "sha256={sig}")
		f.Add(true, []byte(body), "a\r\n\x00b", "Cookie", "c=1", "Basic x", "sha256={sig}")
	}
	f.Add(false, []byte(`{"id":"t"}`), "", "x-test", "", "", "")
	f.Add(true, []byte(`{"id":"s"}`), strings.Repeat("😀", 100), "X-Signature", "sha256={sig}", "", "sha256={sig}")
	f.Add(true, []byte(`{"id":"s"}`), "", "X-Correlation-Id", "second", "", "SHA256={sig}")
	f.Add(true, []byte(`{"id":"s"}`), "", "Proxy-Authorization", "p", "", "sha256={sig}0")
	f.Fuzz(func(t *testing.T, signed bool, body []byte, corrID, name, value, authorization, sigTmpl string) {
		path := "/inbox/open"
		if signed {
			path = "/inbox/signed"
		}
		mac := hmac.New(sha256.New, []byte(fuzzSecret))
		mac.Write(body)
		wantSig := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", authorization)
		req.Header.Set("Cookie", authorization)
		req.Header.Set(inbox.CorrelationHeader, corrID)
		req.Header.Set("X-Signature", strings.ReplaceAll(sigTmpl, "{sig}", strings.TrimPrefix(wantSig, "sha256=")))
		req.Header.Add(name, strings.ReplaceAll(value, "{sig}", strings.TrimPrefix(wantSig, "sha256=")))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		res := rec.Result()
		answer, _ := io.ReadAll(res.Body)
		var got map[string]string
		if res.Header.Get("Content-Type") != "application/json" || json.Unmarshal(answer, &got) != nil || len(got) != 1 {
			t.Fatalf("status %d: the answer %q (%s) is not one JSON member", res.StatusCode, answer, res.Header.Get("Content-Type"))
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("%s, body %q, headers %q: status %d %s: "+format,
				append([]any{path, body, req.Header, res.StatusCode, answer}, args...)...)
		}

		// 1. The size cap.
		if (len(body) > fuzzMaxBody) != (res.StatusCode == http.StatusRequestEntityTooLarge) {
			fail("413 is for a body above %d bytes only", fuzzMaxBody)
		}
		if res.StatusCode == http.StatusRequestEntityTooLarge {
			return
		}
		// 2. The credentials.
		sigs := req.Header.Values("X-Signature")
		sigOK := len(sigs) == 1 && sigs[0] == wantSig
		if signed && sigOK == (res.StatusCode == http.StatusUnauthorized) {
			fail("the signature is right: %v (want %q)", sigOK, wantSig)
		}
		if res.StatusCode == http.StatusUnauthorized {
			if !signed || strings.Contains(got["error"], fuzzSecret) || strings.Contains(got["error"], wantSig[7:]) {
				fail("401 from the open source, or a reason that holds a credential")
			}
			return
		}
		// 3. The header filter.
		filtered := !signed && len(req.Header.Values("X-Test")) > 0
		if filtered != (got["status"] == "filtered") {
			fail("filtered is for the open source with X-Test only")
		}
		if filtered {
			if res.StatusCode != http.StatusAccepted {
				fail("filtered must be 202")
			}
			return
		}
		// 4. The correlation id.
		received := ""
		if v := req.Header.Values(inbox.CorrelationHeader); len(v) > 0 {
			received = v[len(v)-1]
		}
		corr := res.Header.Get(inbox.CorrelationHeader)
		if clean := inbox.CleanCorrelationID(received); clean != "" && corr != clean {
			fail("correlation id %q, want %q", corr, clean)
		} else if _, err := uuid.Parse(corr); clean == "" && err != nil {
			fail("correlation id %q is not a new UUID", corr)
		}
		// 5. The JSON document.
		doc, valid := referenceDocument(body)
		mayRefuse := bytes.Contains(body, []byte(`\u`)) || bytes.ContainsAny(body, "eE")
		if got["error"] == "Invalid JSON" {
			if valid && !mayRefuse {
				fail("a valid JSON document got Invalid JSON")
			}
			return
		}
		if !valid {
			fail("a body that is not one JSON document was not refused")
		}
		// 6. The identifiers.
		key, hasKey := referenceKey(doc)
		if msg := got["error"]; strings.HasPrefix(msg, "Missing idempotency key") != !hasKey {
			fail("the key is %q (%v)", key, hasKey)
		}
		if res.StatusCode == http.StatusBadRequest {
			if msg := got["error"]; !strings.HasPrefix(msg, "Missing idempotency key at $") && !strings.Contains(msg, " exceeds 255 characters") {
				fail("an unexpected 400 reason")
			}
			return
		}
		// 8. The row.
		switch res.StatusCode {
		case http.StatusOK:
			var n int
			if got["status"] != "duplicate" || pool.QueryRow(context.Background(),
				`SELECT count(*) FROM inbox WHERE source = $1 AND idempotency_key = $2`, sourceOf(signed), key).Scan(&n) != nil || n != 1 {
				fail("a duplicate of no stored row (%d rows of key %q)", n, key)
			}
		case http.StatusAccepted:
			var (
				source, storedKey, storedCorr string
				samePayload                   bool
				headersJSON                   []byte
			)
			if err := pool.QueryRow(context.Background(),
				`SELECT source, idempotency_key, correlation_id, payload = $2::jsonb, headers::text FROM inbox WHERE id = $1`,
				got["messageId"], string(body)).Scan(&source, &storedKey, &storedCorr, &samePayload, &headersJSON); err != nil {
				fail("reading the stored row %q: %v", got["messageId"], err)
			}
			var stored map[string]string
			if err := json.Unmarshal(headersJSON, &stored); err != nil {
				fail("the stored headers %s: %v", headersJSON, err)
			}
			if source != sourceOf(signed) || storedKey != key || storedCorr != corr || !samePayload {
				fail("the row holds source %q, key %q (want %q), correlation %q, same payload %v", source, storedKey, key, storedCorr, samePayload)
			}
			for n := range stored {
				if n != strings.ToLower(n) || n == "authorization" || n == "cookie" || n == "proxy-authorization" || (signed && n == "x-signature") {
					fail("the stored headers %s hold %q", headersJSON, n)
				}
			}
		default:
			fail("an unexpected status")
		}
	})
}

// sourceOf names the source of FuzzHandler.
func sourceOf(signed bool) string {
	if signed {
		return "signed"
	}
	return "open"
}

// referenceDocument decodes a body as the documentation defines a valid one: UTF-8 text that
// holds one JSON document nested at most 1000 deep.
func referenceDocument(body []byte) (any, bool) {
	if !utf8.Valid(body) || !json.Valid(body) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, false
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			if depth++; depth > inbox.MaxNestingDepth {
				return nil, false
			}
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
	d = json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var doc any
	if d.Decode(&doc) != nil {
		return nil, false
	}
	return doc, true
}

// referenceKey returns the text of $.id as docs/README.md describes it: a string as it is, a
// number as its JSON text, an object or an array as compact JSON with members sorted by name;
// null and the empty string are no key.
func referenceKey(doc any) (string, bool) {
	m, ok := doc.(map[string]any)
	if !ok {
		return "", false
	}
	switch v := m["id"].(type) {
	case nil:
		return "", false
	case string:
		return v, v != ""
	case json.Number:
		return v.String(), true
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		return strings.TrimSuffix(buf.String(), "\n"), true
	}
}
