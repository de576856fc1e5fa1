package lambdafn_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/lambdafn"
)

// seen is the request as the wrapped handler received it.
type seen struct {
	Method, Path, RawQuery, Host string
	Header                       http.Header
	ContentLength                int64
	Body                         []byte
}

// recorder is an http.Handler that records the request and answers 202 with headers.
type recorder struct {
	got *seen
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		panic(err)
	}
	rc.got = &seen{
		Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Host: r.Host,
		Header: r.Header.Clone(), ContentLength: r.ContentLength, Body: body,
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Correlation-Id", "corr-1")
	w.Header().Set("Retry-After", "7")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte(`{"messageId":"m-1"}`))
}

// baseEvent reads the real-shaped HTTP API event of testdata.
func baseEvent(t *testing.T) lambdafn.HTTPRequest {
	t.Helper()
	b, err := os.ReadFile("testdata/http-api-v2-event.json")
	require.NoError(t, err)
	var ev lambdafn.HTTPRequest
	require.NoError(t, json.Unmarshal(b, &ev))
	return ev
}

// invokeHTTP runs ev through HTTPHandler over rc with aws-lambda-go's own decoding.
func invokeHTTP(t *testing.T, rc *recorder, ev lambdafn.HTTPRequest) lambdafn.HTTPResponse {
	t.Helper()
	payload, err := json.Marshal(ev)
	require.NoError(t, err)
	h := lambda.NewHandler(lambdafn.HTTPHandler(rc, slog.New(slog.NewJSONHandler(io.Discard, nil))))
	out, err := h.Invoke(context.Background(), payload)
	require.NoError(t, err)
	var resp lambdafn.HTTPResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	return resp
}

func TestHTTPHandlerBuildsTheRequestThatNetHTTPWould(t *testing.T) {
	t.Parallel()
	binary := []byte{'{', 0xff, 0x00, '}', '\n'}
	tests := []struct {
		name   string
		modify func(ev *lambdafn.HTTPRequest)
		check  func(t *testing.T, got *seen)
	}{
		{
			name:   "a JSON body",
			modify: func(*lambdafn.HTTPRequest) {},
			check: func(t *testing.T, got *seen) {
				assert.Equal(t, "POST", got.Method)
				assert.Equal(t, "/inbox/orders", got.Path)
				assert.Equal(t, `{"id":"evt-1","type":"order.created"}`, string(got.Body))
				assert.Equal(t, int64(37), got.ContentLength)
				assert.Equal(t, []string{"37"}, got.Header.Values("Content-Length"))
				assert.Equal(t, []string{"application/json"}, got.Header.Values("Content-Type"))
				assert.Equal(t, "r3pmxmplak.execute-api.us-east-2.amazonaws.com", got.Host)
				assert.NotContains(t, got.Header, "Host", "net/http keeps the host out of the header map")
			},
		},
		{
			name: "a base64 body, decoded, its decoded length in Content-Length",
			modify: func(ev *lambdafn.HTTPRequest) {
				ev.Body = base64.StdEncoding.EncodeToString(binary)
				ev.IsBase64Encoded = true
				ev.Headers["content-length"] = "5"
			},
			check: func(t *testing.T, got *seen) {
				assert.Equal(t, binary, got.Body)
				assert.Equal(t, int64(len(binary)), got.ContentLength)
				assert.Equal(t, []string{"5"}, got.Header.Values("Content-Length"))
			},
		},
		{
			name: "a base64 body without a content-length header still has its length",
			modify: func(ev *lambdafn.HTTPRequest) {
				ev.Body = base64.StdEncoding.EncodeToString(make([]byte, 4096))
				ev.IsBase64Encoded = true
				delete(ev.Headers, "content-length")
			},
			check: func(t *testing.T, got *seen) {
				assert.Len(t, got.Body, 4096)
				assert.Equal(t, int64(4096), got.ContentLength)
				assert.Empty(t, got.Header.Values("Content-Length"))
			},
		},
		{
			name: "a header value with commas stays one value",
			modify: func(ev *lambdafn.HTTPRequest) {
				ev.Headers["stripe-signature"] = "t=1795928400,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd"
				ev.Headers["webhook-signature"] = "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
			},
			check: func(t *testing.T, got *seen) {
				assert.Equal(t, []string{"t=1795928400,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd"},
					got.Header.Values("Stripe-Signature"))
				assert.Equal(t, []string{"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="},
					got.Header.Values("Webhook-Signature"))
			},
		},
		{
			name: "a repeated header arrives joined, as API Gateway joined it",
			modify: func(ev *lambdafn.HTTPRequest) {
				ev.Headers["x-tag"] = "a, b"
			},
			check: func(t *testing.T, got *seen) {
				assert.Equal(t, []string{"a, b"}, got.Header.Values("X-Tag"))
			},
		},
		{
			name: "cookies become one Cookie header",
			modify: func(ev *lambdafn.HTTPRequest) {
				ev.Cookies = []string{"session=abc", "theme=dark"}
			},
			check: func(t *testing.T, got *seen) {
				assert.Equal(t, []string{"session=abc; theme=dark"}, got.Header.Values("Cookie"))
			},
		},
		{
			name: "a named stage is stripped from the path",
			modify: func(ev *lambdafn.HTTPRequest) {
				ev.RawPath = "/prod/inbox/orders"
				ev.RequestContext.HTTP.Path = "/prod/inbox/orders"
				ev.RequestContext.Stage = "prod"
			},
			check: func(t *testing.T, got *seen) {
				assert.Equal(t, "/inbox/orders", got.Path)
			},
		},
		{
			name: "the root of a named stage is /",
			modify: func(ev *lambdafn.HTTPRequest) {
				ev.RawPath = "/prod"
				ev.RequestContext.HTTP.Path = "/prod"
				ev.RequestContext.HTTP.Method = "GET"
				ev.RequestContext.Stage = "prod"
			},
			check: func(t *testing.T, got *seen) {
				assert.Equal(t, "GET", got.Method)
				assert.Equal(t, "/", got.Path)
			},
		},
		{
			name: "a path that only starts with the stage name is kept",
			modify: func(ev *lambdafn.HTTPRequest) {
				ev.RawPath = "/production/orders"
				ev.RequestContext.HTTP.Path = "/production/orders"
				ev.RequestContext.Stage = "prod"
			},
			check: func(t *testing.T, got *seen) {
				assert.Equal(t, "/production/orders", got.Path)
			},
		},
		{
			name: "the $default stage is not in the path",
			modify: func(ev *lambdafn.HTTPRequest) {
				ev.RawPath = "/default/x"
				ev.RequestContext.Stage = "$default"
			},
			check: func(t *testing.T, got *seen) {
				assert.Equal(t, "/default/x", got.Path)
			},
		},
		{
			name: "the query string",
			modify: func(ev *lambdafn.HTTPRequest) {
				ev.RawQueryString = "a=1&b=two"
			},
			check: func(t *testing.T, got *seen) {
				assert.Equal(t, "a=1&b=two", got.RawQuery)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := baseEvent(t)
			tt.modify(&ev)
			rc := &recorder{}
			resp := invokeHTTP(t, rc, ev)
			require.NotNil(t, rc.got, "the handler was not called")
			assert.Equal(t, http.StatusAccepted, resp.StatusCode)
			tt.check(t, rc.got)
			// No header of the adapter's own reaches the handler.
			for name := range rc.got.Header {
				assert.NotContains(t, name, "Golambdaproxy")
			}
		})
	}
}

func TestHTTPHandlerResponse(t *testing.T) {
	t.Parallel()
	rc := &recorder{}
	resp := invokeHTTP(t, rc, baseEvent(t))
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, `{"messageId":"m-1"}`, resp.Body)
	assert.False(t, resp.IsBase64Encoded)
	hdr := http.Header{}
	for k, v := range resp.Headers {
		hdr.Set(k, v)
	}
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	assert.Equal(t, "corr-1", hdr.Get("X-Correlation-Id"))
	assert.Equal(t, "7", hdr.Get("Retry-After"))
}

func TestHTTPHandlerRefusesABodyThatIsNotBase64(t *testing.T) {
	t.Parallel()
	ev := baseEvent(t)
	ev.Body = "not base64!"
	ev.IsBase64Encoded = true
	rc := &recorder{}
	resp := invokeHTTP(t, rc, ev)
	assert.Nil(t, rc.got, "the handler must not see an event that is no request")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, `{"error":"Invalid JSON"}`, resp.Body)
	assert.Equal(t, "application/json", resp.Headers["Content-Type"])
}
