package lambdafn_test

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/deploy/lambdazip"
	"github.com/alternayte/queuebox/shared/transform/builtin"
)

const module = "github.com/alternayte/queuebox"

// heavy are the modules whose presence in a function's binary this test pins: the broker
// clients of the destinations, the JavaScript engine of the transforms with the JSONata
// build it loads, and the OpenTelemetry SDK of the tracer provider. Each is named by the
// import path prefix of its packages.
var heavy = map[string]string{
	"franz-go":   "github.com/twmb/franz-go",
	"nats.go":    "github.com/nats-io/nats.go",
	"amqp091-go": "github.com/rabbitmq/amqp091-go",
	"goja":       "github.com/dop251/goja",
	"jsjsonata":  module + "/shared/transform/jsjsonata",
	"otel-sdk":   "go.opentelemetry.io/otel/sdk",
}

// kindClient is the client module of each broker destination (lambdazip.Connectors).
var kindClient = map[string]string{"rabbitmq": "amqp091-go", "kafka": "franz-go", "nats": "nats.go"}

// functionLinks lists the packages of every Lambda function as `make lambda` builds it
// (linux/arm64, -tags lambda.norpc plus tags) and returns, per function, the heavy modules
// that it links, sorted.
func functionLinks(t *testing.T, tags ...string) map[string][]string {
	t.Helper()
	names, err := lambdazip.Functions("../..")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	args := []string{"list", "-deps", "-tags", strings.Join(append([]string{lambdazip.BuildTag}, tags...), ","),
		"-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`}
	links := map[string][]string{}
	for _, name := range names {
		cmd := exec.Command("go", append(args, "./functions/"+name)...)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), lambdazip.BuildEnv...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "go list %v ./functions/%s: %s", tags, name, stderr.String())
		found := []string{}
		for label, prefix := range heavy {
			for _, pkg := range strings.Fields(string(out)) {
				if pkg == prefix || strings.HasPrefix(pkg, prefix+"/") {
					found = append(found, label)
					break
				}
			}
		}
		slices.Sort(found)
		links[name] = found
	}
	return links
}

// TestEachFunctionLinksOnlyWhatItRuns pins which broker clients, JavaScript modules and
// tracing SDK each function links: the poll function, which delivers and transforms, links
// every broker client and the JSONata engine; the inbox (source transforms) and admin (the
// transform test) functions the engine alone; the relay and retention functions, which
// neither deliver nor transform, none of them. The poll, inbox and relay functions record
// spans and link the OpenTelemetry SDK; the admin and retention functions record none and do
// not. Each build tag of lambdazip.Connectors leaves exactly its client out of the poll
// function.
func TestEachFunctionLinksOnlyWhatItRuns(t *testing.T) {
	t.Parallel()
	js := []string{"goja", "jsjsonata"}
	jsTraced := []string{"goja", "jsjsonata", "otel-sdk"}
	all := []string{"amqp091-go", "franz-go", "goja", "jsjsonata", "nats.go", "otel-sdk"}
	sdk := []string{"otel-sdk"}
	want := map[string][]string{"admin": js, "inbox": jsTraced, "poll": all, "relay": sdk, "retention": {}}
	assert.Equal(t, want, functionLinks(t))

	var every []string
	for _, c := range lambdazip.Connectors {
		every = append(every, c.Tag)
		t.Run(c.Tag, func(t *testing.T) {
			t.Parallel()
			client, ok := kindClient[c.Kind]
			require.True(t, ok, "the client of %s", c.Kind)
			got := functionLinks(t, c.Tag)
			assert.Equal(t, slices.DeleteFunc(slices.Clone(all), func(m string) bool { return m == client }), got["poll"])
			assert.Equal(t, jsTraced, got["inbox"], "the tag changes only the poll function")
			assert.Equal(t, sdk, got["relay"])
		})
	}
	t.Run("every broker left out", func(t *testing.T) {
		t.Parallel()
		assert.Equal(t, jsTraced, functionLinks(t, every...)["poll"], "the poll function keeps http, the engine and the SDK")
	})
	t.Run(builtin.Tag, func(t *testing.T) {
		t.Parallel()
		brokers := []string{"amqp091-go", "franz-go", "nats.go", "otel-sdk"}
		want := map[string][]string{"admin": {}, "inbox": sdk, "poll": brokers, "relay": sdk, "retention": {}}
		assert.Equal(t, want, functionLinks(t, builtin.Tag), "no function links the JavaScript engine")
	})
}
