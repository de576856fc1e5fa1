package connect_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"path"
	"strings"
	"testing"
)

const module = "github.com/alternayte/queuebox"

// drivers maps the import path prefix of each broker client library to the one folder under
// shared/connect that may import it.
var drivers = map[string]string{
	"github.com/rabbitmq/amqp091-go": module + "/shared/connect/rabbitmq",
	"github.com/twmb/franz-go":       module + "/shared/connect/kafka",
	"github.com/nats-io/":            module + "/shared/connect/nats",
}

// testOnly are the packages whose tests, and tests alone, may reach the brokers with their
// clients: the end-to-end tests of queuebox serve, which observe what it delivered and
// publish what its sources consume, and those of the capture node, which publish what its
// sources consume (and start a kfake cluster).
var testOnly = map[string]bool{
	module + "/shared/localserver": true,
	module + "/capturenode":        true,
	// The test of the bridge examples checks that the brokers are up before it runs them.
	module + "/examples": true,
}

// applicationSide are the programs that stand for what is not QueueBox, so they use the
// broker's own client as a user would: the application that publishes a message, the
// operator who creates a JetStream stream, the Kafka cluster (kfake) that this machine lacks,
// and the broker alone in the source benchmark. No QueueBox binary links them.
var applicationSide = map[string]bool{
	module + "/examples/internal/publish":   true,
	module + "/examples/nats-bridge/stream": true,
	module + "/examples/kafka-bridge/kfake": true,
	// The source benchmark's first ceiling is the broker's own consume-and-ack rate with no
	// QueueBox in the way, measured with the broker's client (and kfake for Kafka).
	module + "/bench/sourcebench": true,
}

// driverOf returns the folder that may import path, or "" when path is no broker client.
func driverOf(path string) string {
	for prefix, home := range drivers {
		if path == strings.TrimSuffix(prefix, "/") || strings.HasPrefix(path, strings.TrimSuffix(prefix, "/")+"/") {
			return home
		}
	}
	return ""
}

func inFolder(pkg, folder string) bool { return pkg == folder || strings.HasPrefix(pkg, folder+"/") }

// goList runs go list with args from the module root and returns its output lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// A broker client is imported by its own folder under shared/connect alone: every other
// package reaches a broker through that folder's destination.
func TestBrokerClientsStayInTheirFolder(t *testing.T) {
	t.Parallel()
	lines := goList(t, "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
	if len(lines) < 20 {
		t.Fatalf("go list found %d packages; the module has more", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		parts := strings.SplitN(l, "|", 3)
		if len(parts) != 3 {
			t.Fatalf("go list line %q", l)
		}
		pkg := parts[0]
		check := func(imports string, test bool) {
			for _, imp := range strings.Fields(imports) {
				home := driverOf(imp)
				if home == "" {
					continue
				}
				seen[home] = true
				if inFolder(pkg, home) || (test && testOnly[pkg]) || applicationSide[pkg] {
					continue
				}
				t.Errorf("%s imports %s, which belongs to %s alone", pkg, imp, home)
			}
		}
		check(parts[1], false)
		check(parts[2], true)
	}
	for _, home := range drivers {
		if !seen[home] {
			t.Errorf("no package imports the client of %s: the check looks at the wrong names", home)
		}
	}
}

// The programs that neither deliver outbox rows nor consume from a broker link no broker
// client: their composition roots pass no broker connector and no source builder (the
// connector registry, shared/service/connectors, which only the delivering and consuming
// programs import, holds them). The poll function, which delivers, links all three; so does
// the capture node, which runs the broker sources (RabbitMQ, Kafka and NATS JetStream into the
// inbox) through the registry.
func TestOnlyDeliveringAndConsumingProgramsLinkBrokerClients(t *testing.T) {
	t.Parallel()
	for _, prog := range []string{"./functions/inbox", "./functions/relay", "./functions/retention", "./functions/admin"} {
		for _, dep := range goList(t, "-deps", prog) {
			if driverOf(dep) != "" {
				t.Errorf("%s links %s", prog, dep)
			}
		}
	}
	links := func(prog string) map[string]bool {
		out := map[string]bool{}
		for _, dep := range goList(t, "-deps", prog) {
			if home := driverOf(dep); home != "" {
				out[home] = true
			}
			out[dep] = true
		}
		return out
	}
	poll, node := links("./functions/poll"), links("./capturenode")
	for _, home := range drivers {
		if !poll[home] {
			t.Errorf("functions/poll does not link the client of %s", home)
		}
		if !node[home] {
			t.Errorf("capturenode does not link the client of %s, which its broker sources use", home)
		}
	}
	if !node[module+"/shared/service/connectors"] {
		t.Errorf("capturenode does not link shared/service/connectors, through which it runs the broker sources")
	}
	if !poll[module+"/shared/service/connectors"] {
		t.Errorf("functions/poll does not link shared/service/connectors, through which it builds the broker publishers")
	}
}

// A connector's configuration package (shared/connect/<system>/<system>config), which every
// program links to check the whole configuration, links no broker client and no other
// connector: only the configuration model and the standard library. The programs that deliver
// nothing link these packages and no client (TestOnlyDeliveringAndConsumingProgramsLinkBrokerClients).
func TestConnectorConfigurationsLinkNoClient(t *testing.T) {
	t.Parallel()
	var configs []string
	for _, p := range goList(t, "./shared/connect/...") {
		folder, base := path.Split(p)
		if base == path.Base(folder)+"config" {
			configs = append(configs, p)
		}
	}
	if len(configs) < 3 {
		t.Fatalf("found %d configuration packages under shared/connect (%v); there are at least 3", len(configs), configs)
	}
	for _, pkg := range configs {
		for _, dep := range goList(t, "-deps", pkg) {
			if driverOf(dep) != "" {
				t.Errorf("%s links the client %s", pkg, dep)
			}
			if strings.HasPrefix(dep, module+"/shared/connect/") && dep != pkg && dep != module+"/shared/kind" {
				t.Errorf("%s links %s, a connector", pkg, dep)
			}
		}
	}
}
