package helmchart

import (
	"bufio"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// imageFacts are the facts of the QueueBox image that the chart must match, read from
// local/Dockerfile so that they cannot drift.
type imageFacts struct {
	UID            int64         // the uid of the USER of the queuebox stage
	Ports          []int32       // the EXPOSE ports of the queuebox stage
	HealthPath     string        // the path of the HEALTHCHECK URL
	HealthPort     int32         // the port of the HEALTHCHECK URL
	HealthTimeout  time.Duration // --timeout of the HEALTHCHECK
	StartPeriod    time.Duration // --start-period of the HEALTHCHECK
	CaptureDir     string        // the capture state directory the build makes
	Entrypoint     string        // the ENTRYPOINT of the queuebox stage
	Cmd            string        // the CMD of the queuebox stage
	Binaries       []string      // the paths the queuebox stage copies to /usr/local/bin
	CaptureNodeBin string        // the capture node's binary in the image
}

var (
	passwdLine  = regexp.MustCompile(`'(\w+):x:(\d+):(\d+):`)
	captureDir  = regexp.MustCompile(`(/var/lib/queuebox/capture)\b`)
	healthFlags = regexp.MustCompile(`--(timeout|start-period)=(\S+)`)
	jsonArg     = regexp.MustCompile(`"([^"]*)"`)
)

// readImageFacts parses the Dockerfile: the passwd entries of the build stage, and the
// USER, EXPOSE, HEALTHCHECK, ENTRYPOINT, CMD and COPY lines of the queuebox stage.
func readImageFacts(t *testing.T, path string) imageFacts {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the image's Dockerfile: %v", err)
	}
	var facts imageFacts
	uids := map[string]int64{}
	var user, stage string
	var lines []string
	// Join continuation lines so that each instruction is one line.
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	var cur strings.Builder
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	for _, line := range lines {
		for _, m := range passwdLine.FindAllStringSubmatch(line, -1) {
			uid, _ := strconv.ParseInt(m[2], 10, 64)
			uids[m[1]] = uid
		}
		if m := captureDir.FindStringSubmatch(line); m != nil && strings.Contains(line, "mkdir") {
			facts.CaptureDir = m[1]
		}
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			fields := strings.Fields(rest)
			stage = fields[len(fields)-1]
		}
		if stage != "queuebox" {
			continue
		}
		switch strings.ToUpper(instr) {
		case "USER":
			user = strings.TrimSpace(rest)
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				n, err := strconv.ParseInt(strings.TrimSuffix(p, "/tcp"), 10, 32)
				if err != nil {
					t.Fatalf("EXPOSE %s: %v", p, err)
				}
				facts.Ports = append(facts.Ports, int32(n))
			}
		case "HEALTHCHECK":
			parseHealthcheck(t, rest, &facts)
		case "ENTRYPOINT":
			facts.Entrypoint = strings.Join(jsonArgs(rest), " ")
		case "CMD":
			facts.Cmd = strings.Join(jsonArgs(rest), " ")
		case "COPY":
			fields := strings.Fields(rest)
			if fields[len(fields)-1] == "/usr/local/bin/" {
				for _, f := range fields[:len(fields)-1] {
					if strings.HasPrefix(f, "/out/bin/") {
						facts.Binaries = append(facts.Binaries, "/usr/local/bin/"+strings.TrimPrefix(f, "/out/bin/"))
					}
				}
			}
		}
	}
	uid, ok := uids[user]
	if !ok {
		t.Fatalf("the queuebox stage runs as %q, which the build's passwd does not name", user)
	}
	facts.UID = uid
	for _, b := range facts.Binaries {
		if strings.HasSuffix(b, "/capturenode") {
			facts.CaptureNodeBin = b
		}
	}
	return facts
}

// parseHealthcheck reads the flags and the URL of a HEALTHCHECK instruction.
func parseHealthcheck(t *testing.T, rest string, facts *imageFacts) {
	t.Helper()
	for _, m := range healthFlags.FindAllStringSubmatch(rest, -1) {
		d, err := time.ParseDuration(m[2])
		if err != nil {
			t.Fatalf("HEALTHCHECK --%s=%s: %v", m[1], m[2], err)
		}
		if m[1] == "timeout" {
			facts.HealthTimeout = d
		} else {
			facts.StartPeriod = d
		}
	}
	for _, arg := range jsonArgs(rest) {
		if !strings.HasPrefix(arg, "http://") {
			continue
		}
		u, err := url.Parse(arg)
		if err != nil {
			t.Fatalf("HEALTHCHECK URL %s: %v", arg, err)
		}
		port, err := strconv.ParseInt(u.Port(), 10, 32)
		if err != nil {
			t.Fatalf("HEALTHCHECK URL %s has no port: %v", arg, err)
		}
		facts.HealthPath, facts.HealthPort = u.Path, int32(port)
	}
}

// jsonArgs returns the strings of an exec-form argument list.
func jsonArgs(s string) []string {
	var out []string
	for _, m := range jsonArg.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestReadImageFacts(t *testing.T) {
	f := readImageFacts(t, dockerfilePath)
	if f.UID != 10001 || len(f.Ports) != 1 || f.Ports[0] != 8080 || f.HealthPath != "/health" || f.HealthPort != 8080 ||
		f.CaptureDir != "/var/lib/queuebox/capture" || f.CaptureNodeBin != "/usr/local/bin/capturenode" ||
		f.Entrypoint != "/usr/local/bin/queuebox" || f.Cmd != "serve" || f.HealthTimeout != 5*time.Second || f.StartPeriod != 60*time.Second {
		t.Fatalf("the facts of %s changed, or the parser misread them: %+v", dockerfilePath, f)
	}
}
