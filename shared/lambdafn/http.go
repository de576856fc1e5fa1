package lambdafn

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/alternayte/queuebox/shared/redact"
)

// HTTPRequest is the event of an API Gateway HTTP API with payload format version 2.0.
type HTTPRequest = events.APIGatewayV2HTTPRequest

// HTTPResponse is the answer of a function to an API Gateway HTTP API (payload format 2.0).
type HTTPResponse = events.APIGatewayV2HTTPResponse

// eventKey holds the event being served in the request context, for restoreRequest.
type eventKey struct{}

// HTTPHandler returns the handler of a function behind an API Gateway HTTP API whose Lambda
// integration uses payload format version 2.0. It turns each event into an *http.Request
// for h, and what h writes into the response, with aws-lambda-go-api-proxy's httpadapter
// (V2), so that h is the very handler that the local process serves, answering with the
// same status, headers and body. On top of httpadapter it makes the request the one that
// net/http would have built from the client's request:
//
//   - a body with isBase64Encoded is decoded, and r.ContentLength is the length of the
//     decoded body (API Gateway hands the body over whole), so a Content-Length rule sees
//     the real size; a content-length header of the event is set to that length too;
//   - each header has the one value that the event carries. httpadapter splits every value
//     at its commas, which would break a value such as Stripe-Signature "t=1,v1=ab" into
//     two (and a credential header that appears twice is refused). The event cannot say
//     more: payload 2.0 joins a header that the client repeated into one value with
//     commas, so such a header reaches h as one joined value;
//   - the host header becomes r.Host and leaves r.Header, as net/http does;
//   - the cookies of the event become one Cookie header, joined with "; " as a client
//     sends them;
//   - a named stage is stripped from the front of the path: on the API's execute-api
//     endpoint, a stage other than $default is the first segment of rawPath
//     (/prod/inbox/orders on stage prod is routed as /inbox/orders). The $default stage is
//     not part of the path. A custom domain with an API mapping key keeps the key in the
//     path; map the API at the root of the domain.
//
// An event that cannot become a request (a body that is not valid base64) is answered
// 400 {"error":"Invalid JSON"}, as the inbox answers a body that broke off. The handler
// itself returns no error: an error would make API Gateway answer 500 with its own body.
func HTTPHandler(h http.Handler, log *slog.Logger) func(context.Context, HTTPRequest) (HTTPResponse, error) {
	if log == nil {
		log = slog.Default()
	}
	adapter := httpadapter.NewV2(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ev, ok := r.Context().Value(eventKey{}).(*HTTPRequest); ok {
			restoreRequest(r, ev)
		}
		h.ServeHTTP(w, r)
	}))
	return func(ctx context.Context, ev HTTPRequest) (HTTPResponse, error) {
		ev.RawPath = stripStage(ev.RawPath, ev.RequestContext.Stage)
		ev.RequestContext.HTTP.Path = stripStage(ev.RequestContext.HTTP.Path, ev.RequestContext.Stage)
		resp, err := adapter.ProxyWithContext(context.WithValue(ctx, eventKey{}, &ev), ev)
		if err != nil {
			log.WarnContext(ctx, "API Gateway event is not a valid HTTP request",
				"error", redact.Error(err), "path", ev.RawPath)
			return HTTPResponse{
				StatusCode: http.StatusBadRequest,
				Headers:    map[string]string{"Content-Type": "application/json"},
				Body:       `{"error":"Invalid JSON"}`,
			}, nil
		}
		return resp, nil
	}
}

// stripStage removes a named stage from the front of path.
func stripStage(path, stage string) string {
	if stage == "" || stage == "$default" {
		return path
	}
	prefix := "/" + stage
	switch {
	case path == prefix:
		return "/"
	case strings.HasPrefix(path, prefix+"/"):
		return path[len(prefix):]
	}
	return path
}

// restoreRequest replaces the headers that httpadapter built with the event's, one value
// each, and moves the host header to r.Host; see HTTPHandler.
func restoreRequest(r *http.Request, ev *HTTPRequest) {
	hdr := make(http.Header, len(ev.Headers)+1)
	for name, value := range ev.Headers {
		key := http.CanonicalHeaderKey(name)
		switch key {
		case "Host":
			r.Host = value
			continue
		case "Content-Length":
			// httpadapter gives a body of known length; the header says the same.
			value = strconv.FormatInt(max(r.ContentLength, 0), 10)
		}
		hdr[key] = append(hdr[key], value)
	}
	if len(ev.Cookies) > 0 {
		hdr["Cookie"] = []string{strings.Join(ev.Cookies, "; ")}
	}
	r.Header = hdr
}
