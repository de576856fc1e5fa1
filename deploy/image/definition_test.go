package main

import (
	"encoding/json"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dockerfile is what the test reads from local/Dockerfile: the instructions of the queuebox
// stage and the lines of the build stage, continuation lines joined.
type dockerfile struct {
	stage map[string][]string // instruction (upper case) to its arguments, in order
	build []string            // the build stage's instructions
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	data, err := os.ReadFile("../../local/Dockerfile")
	if err != nil {
		t.Fatalf("reading local/Dockerfile: %v", err)
	}
	d := dockerfile{stage: map[string][]string{}}
	var cur strings.Builder
	stage := ""
	for _, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		ins := cur.String()
		cur.Reset()
		cmd, args, _ := strings.Cut(ins, " ")
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			f := strings.Fields(args)
			stage = f[len(f)-1]
			continue
		}
		switch stage {
		case "build":
			d.build = append(d.build, ins)
		case "queuebox":
			d.stage[cmd] = append(d.stage[cmd], strings.TrimSpace(args))
		}
	}
	if len(d.stage) == 0 || len(d.build) == 0 {
		t.Fatalf("local/Dockerfile has no stage build or queuebox")
	}
	return d
}

// one returns the only instruction cmd of the queuebox stage.
func (d dockerfile) one(t *testing.T, cmd string) string {
	t.Helper()
	if len(d.stage[cmd]) != 1 {
		t.Fatalf("the queuebox stage of local/Dockerfile has %d %s, want one", len(d.stage[cmd]), cmd)
	}
	return d.stage[cmd][0]
}

func jsonArray(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("exec form %s: %v", s, err)
	}
	return out
}

var (
	quoted     = regexp.MustCompile(`'([^']*)'`)
	passwdLine = regexp.MustCompile(`^\w+:x:\d+:\d+:`)
	groupLine  = regexp.MustCompile(`^\w+:x:\d+:$`)
)

// TestDefinitionMatchesTheDockerfile holds the release image to the queuebox stage of
// local/Dockerfile, the image of a plain `docker build`: the same user and ids, the same
// port, health check, working directory, entrypoint and command, the same binaries in the same
// folder, and the same state directories owned by the user.
func TestDefinitionMatchesTheDockerfile(t *testing.T) {
	d := readDockerfile(t)
	def := release

	// The users: the lines that the build stage writes to /etc/passwd and /etc/group.
	var passwd, group []string
	for _, ins := range d.build {
		for _, m := range quoted.FindAllStringSubmatch(ins, -1) {
			switch {
			case passwdLine.MatchString(m[1]):
				passwd = append(passwd, m[1])
			case groupLine.MatchString(m[1]):
				group = append(group, m[1])
			}
		}
	}
	equal(t, "/etc/passwd", passwd, def.Passwd)
	equal(t, "/etc/group", group, def.Group)
	user := d.one(t, "USER")
	uid := -1
	for _, l := range passwd {
		f := strings.Split(l, ":")
		if f[0] == user {
			uid, _ = strconv.Atoi(f[2])
		}
	}
	if uid != def.UID || def.User != strconv.Itoa(uid)+":"+strconv.Itoa(def.GID) || def.GID != def.UID {
		t.Errorf("the Dockerfile runs as %s (uid %d); the release image as %s (uid %d, gid %d)", user, uid, def.User, def.UID, def.GID)
	}

	// The port, the working directory, the entrypoint and the command.
	var ports []string
	for _, p := range strings.Fields(d.one(t, "EXPOSE")) {
		if !strings.Contains(p, "/") {
			p += "/tcp"
		}
		ports = append(ports, p)
	}
	equal(t, "EXPOSE", ports, def.Ports)
	equal(t, "WORKDIR", []string{d.one(t, "WORKDIR")}, []string{def.WorkDir})
	equal(t, "ENTRYPOINT", jsonArray(t, d.one(t, "ENTRYPOINT")), def.Entrypoint)
	equal(t, "CMD", jsonArray(t, d.one(t, "CMD")), def.Cmd)

	checkHealth(t, d.one(t, "HEALTHCHECK"), def.Health)
	checkCopies(t, d, def)
}

// checkHealth compares the HEALTHCHECK's flags and command with the definition's.
func checkHealth(t *testing.T, hc string, h Health) {
	t.Helper()
	flags, cmd, ok := strings.Cut(hc, " CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %s has no exec-form CMD", hc)
	}
	equal(t, "HEALTHCHECK CMD", append([]string{"CMD"}, jsonArray(t, cmd)...), h.Test)
	want := map[string]string{
		"--interval": h.Interval.String(), "--timeout": h.Timeout.String(),
		"--start-period": h.StartPeriod.String(), "--retries": strconv.Itoa(h.Retries),
	}
	seen := map[string]bool{}
	for _, f := range strings.Fields(flags) {
		name, value, _ := strings.Cut(f, "=")
		if name == "--retries" {
			if value != want[name] {
				t.Errorf("HEALTHCHECK %s=%s; the release image has %s", name, value, want[name])
			}
		} else if dur, err := time.ParseDuration(value); err != nil || dur.String() != want[name] {
			t.Errorf("HEALTHCHECK %s=%s; the release image has %s", name, value, want[name])
		}
		seen[name] = true
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("the Dockerfile's HEALTHCHECK has no %s; the release image sets it to %s", name, want[name])
		}
	}
}

// checkCopies compares what the queuebox stage copies with the definition: the binaries and
// their folder, and the state directories with their owner.
func checkCopies(t *testing.T, d dockerfile, def Definition) {
	t.Helper()
	var bins []string
	stateOwner := ""
	for _, c := range d.stage["COPY"] {
		f := strings.Fields(c)
		dst := f[len(f)-1]
		switch {
		case strings.TrimSuffix(dst, "/") == def.BinDir:
			for _, src := range f[:len(f)-1] {
				if !strings.HasPrefix(src, "--") {
					bins = append(bins, path.Base(src))
				}
			}
		case strings.TrimSuffix(dst, "/") == def.WorkDir:
			for _, flag := range f {
				if v, ok := strings.CutPrefix(flag, "--chown="); ok {
					stateOwner = v
				}
			}
		}
	}
	slices.Sort(bins)
	want := slices.Sorted(slices.Values(def.Binaries))
	equal(t, "the binaries in "+def.BinDir, bins, want)
	if stateOwner != def.User {
		t.Errorf("the Dockerfile copies %s owned by %q; the release image's state directories belong to %s", def.WorkDir, stateOwner, def.User)
	}
	build := strings.Join(d.build, "\n")
	for _, dir := range def.StateDirs {
		if dir != def.WorkDir && !strings.Contains(build, "/out/rootfs"+dir) {
			t.Errorf("the Dockerfile's build stage makes no %s, which the release image has", dir)
		}
	}
	if probe := def.Health.Test[1]; path.Dir(probe) != def.BinDir || !slices.Contains(def.Binaries, path.Base(probe)) {
		t.Errorf("the health check runs %s, which the image does not hold", probe)
	}
	if !slices.Contains(def.Binaries, path.Base(def.Entrypoint[0])) {
		t.Errorf("the entrypoint %s is not one of the image's binaries", def.Entrypoint[0])
	}
}

func equal(t *testing.T, what string, dockerfile, release []string) {
	t.Helper()
	if !slices.Equal(dockerfile, release) {
		t.Errorf("%s: local/Dockerfile has %q, the release image %q", what, dockerfile, release)
	}
}
