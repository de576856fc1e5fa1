package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/alternayte/queuebox/shared/lambdafn"
)

// TestEventsAreIAMAuthorized checks that every event of testdata has the shape of an API
// Gateway HTTP API (payload 2.0) request that passed IAM authorization: a SigV4
// Authorization header and the caller in requestContext.authorizer.iam, and a body whose
// content-length is its length.
func TestEventsAreIAMAuthorized(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no events in testdata: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev lambdafn.HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if ev.Version != "2.0" || ev.RawPath == "" || ev.RawPath != ev.RequestContext.HTTP.Path {
			t.Errorf("%s: version %q, rawPath %q, http.path %q", f, ev.Version, ev.RawPath, ev.RequestContext.HTTP.Path)
		}
		if !strings.HasPrefix(ev.Headers["authorization"], "AWS4-HMAC-SHA256 Credential=") {
			t.Errorf("%s: no SigV4 authorization header", f)
		}
		if a := ev.RequestContext.Authorizer; a == nil || a.IAM == nil || !strings.HasPrefix(a.IAM.UserARN, "arn:aws:iam::") {
			t.Errorf("%s: no IAM caller in requestContext.authorizer.iam", f)
		}
		if ev.Body != "" && ev.Headers["content-length"] != strconv.Itoa(len(ev.Body)) {
			t.Errorf("%s: content-length %q for a body of %d bytes", f, ev.Headers["content-length"], len(ev.Body))
		}
	}
}
