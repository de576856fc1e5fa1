package compose_test

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/sirupsen/logrus"
)

// releaseImage is the RELEASE_IMAGE that the test gives docker-compose.release.yml: the name
// of an image archive of `make release` loaded with docker load.
const releaseImage = "queuebox:1.2.3"

// composeFile matches the names that Docker Compose reads: compose.yaml,
// docker-compose.yml, docker-compose.override.yml and the files named with -f.
var composeFile = regexp.MustCompile(`^(docker-)?compose([.-][^/]*)?\.ya?ml$`)

// stack is one `docker compose` invocation that a file of the repository documents.
type stack struct {
	name     string            // subtest name
	files    []string          // the -f files, relative to the repository root
	env      map[string]string // the environment or --env-file
	project  string            // the project name
	services []string          // the services enabled without a profile
	profiles []string          // the profiles that the files declare
	check    func(t *testing.T, p *types.Project)
}

// warnings collects what the loader logs at warning level or above (an unset variable, an
// obsolete attribute), which `docker compose` prints and the test counts as a failure.
type warnings struct {
	mu      sync.Mutex
	entries []string
}

func (w *warnings) Levels() []logrus.Level {
	return []logrus.Level{logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel, logrus.WarnLevel}
}

func (w *warnings) Fire(e *logrus.Entry) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.entries = append(w.entries, e.Level.String()+": "+e.Message)
	return nil
}

// take returns the entries logged since the last call and forgets them.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entries
	w.entries = nil
	return e
}

var logged = &warnings{}

func TestMain(m *testing.M) {
	logrus.AddHook(logged)
	os.Exit(m.Run())
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository root %s has no go.mod: %v", root, err)
	}
	return root
}

// composeFiles lists the Compose files of the repository, relative to root: the files git
// tracks, or, outside a git checkout, a walk that skips node_modules, dist and bin.
func composeFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" && composeFile.MatchString(filepath.Base(f)) {
				files = append(files, filepath.FromSlash(f))
			}
		}
		return files
	}
	t.Logf("git ls-files: %v; walking %s instead", err, root)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "dist", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if composeFile.MatchString(d.Name()) {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return files
}

// load loads files as `docker compose -f ... --profile ...` does from the folder of the first
// file, and fails the test on a warning the loader logged.
func load(t *testing.T, root string, files []string, env map[string]string, profiles ...string) (*types.Project, error) {
	t.Helper()
	details := types.ConfigDetails{
		WorkingDir:  filepath.Join(root, filepath.Dir(files[0])),
		Environment: maps.Clone(env),
	}
	for _, f := range files {
		details.ConfigFiles = append(details.ConfigFiles, types.ConfigFile{Filename: filepath.Join(root, f)})
	}
	logged.take()
	p, err := loader.LoadWithContext(context.Background(), details, loader.WithProfiles(profiles))
	if w := logged.take(); len(w) > 0 {
		t.Errorf("loading %v (profiles %v) logged:\n%s", files, profiles, strings.Join(w, "\n"))
	}
	return p, err
}

func mustLoad(t *testing.T, root string, files []string, env map[string]string, profiles ...string) *types.Project {
	t.Helper()
	p, err := load(t, root, files, env, profiles...)
	if err != nil {
		t.Fatalf("loading %v (profiles %v): %v", files, profiles, err)
	}
	return p
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// checkPaths checks that every build context, Dockerfile and bind-mounted source that the
// project names exists in the repository.
func checkPaths(t *testing.T, p *types.Project) {
	t.Helper()
	for name, s := range p.AllServices() {
		if s.Build != nil {
			if fi, err := os.Stat(s.Build.Context); err != nil || !fi.IsDir() {
				t.Errorf("service %s: build context %s is not a folder (%v)", name, s.Build.Context, err)
			}
			if s.Build.Dockerfile != "" {
				if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
					t.Errorf("service %s: Dockerfile: %v", name, err)
				}
			}
		}
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("service %s: bind mount source: %v", name, err)
			}
		}
	}
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("no enabled service %s in %v", name, p.ServiceNames())
	}
	return s
}

func TestComposeFilesLoad(t *testing.T) {
	root := repoRoot(t)
	envExample, err := dotenv.Read(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatalf("reading .env.example: %v", err)
	}
	releaseEnv := maps.Clone(envExample)
	releaseEnv["RELEASE_IMAGE"] = releaseImage
	rootStack := []string{"postgres", "queuebox", "receiver"}

	stacks := []stack{
		{
			name: "root", files: []string{"docker-compose.yml"}, env: envExample,
			project: "queuebox", services: rootStack, profiles: []string{"kafka", "nats", "rabbitmq"},
			check: func(t *testing.T, p *types.Project) {
				pg := service(t, p, "postgres")
				if got := pg.Environment["POSTGRES_DB"]; got == nil || *got != envExample["POSTGRES_DB"] {
					t.Errorf("postgres POSTGRES_DB = %v, want .env.example's %q", got, envExample["POSTGRES_DB"])
				}
				qb := service(t, p, "queuebox")
				if qb.Image != "queuebox:local" || qb.Build == nil || qb.Build.Target != "queuebox" {
					t.Errorf("queuebox: image %q, build %+v; want queuebox:local built from the queuebox stage", qb.Image, qb.Build)
				}
			},
		},
		{
			name: "root+override", files: []string{"docker-compose.yml", "docker-compose.override.yml"}, env: envExample,
			project: "queuebox", services: rootStack, profiles: []string{"kafka", "nats", "rabbitmq"},
			check: func(t *testing.T, p *types.Project) {
				qb := service(t, p, "queuebox")
				if qb.Image != "queuebox:dev" || qb.Build == nil || qb.Build.Target != "dev" || qb.Build.Dockerfile != "local/Dockerfile" {
					t.Errorf("queuebox: image %q, build %+v; want queuebox:dev from local/Dockerfile's dev stage", qb.Image, qb.Build)
				}
				src := false
				for _, v := range qb.Volumes {
					src = src || (v.Target == "/src" && v.ReadOnly && v.Source == root)
				}
				if !src {
					t.Errorf("queuebox: no read-only mount of %s at /src in %+v", root, qb.Volumes)
				}
				for _, v := range []string{"go-mod-cache", "go-build-cache", "postgres-data"} {
					if _, ok := p.Volumes[v]; !ok {
						t.Errorf("no volume %s in %v", v, slices.Collect(maps.Keys(p.Volumes)))
					}
				}
			},
		},
		{
			name: "root+release", files: []string{"docker-compose.yml", "docker-compose.release.yml"}, env: releaseEnv,
			project: "queuebox", services: rootStack, profiles: []string{"kafka", "nats", "rabbitmq"},
			check: func(t *testing.T, p *types.Project) {
				qb := service(t, p, "queuebox")
				if qb.Image != releaseImage || qb.Build != nil || qb.PullPolicy != types.PullPolicyMissing {
					t.Errorf("queuebox: image %q, build %+v, pull_policy %q; want RELEASE_IMAGE %q, no build, missing",
						qb.Image, qb.Build, qb.PullPolicy, releaseImage)
				}
				if r := service(t, p, "receiver"); r.Build == nil {
					t.Error("receiver: no build; the demo receiver still builds from the source")
				}
			},
		},
		{
			name: "local", files: []string{filepath.Join("local", "docker-compose.yml")}, env: map[string]string{},
			project: "queuebox", services: rootStack,
			check: func(t *testing.T, p *types.Project) {
				if got := service(t, p, "queuebox").Environment["QUEUEBOX_DATABASE_PASSWORD"]; got == nil || *got != "queuebox" {
					t.Errorf("queuebox QUEUEBOX_DATABASE_PASSWORD = %v, want the default queuebox", got)
				}
				if c := p.Configs["queuebox-config"]; !strings.Contains(c.Content, "webhook-api") {
					t.Errorf("config queuebox-config content %q does not name webhook-api", c.Content)
				}
			},
		},
		{
			name: "cdc", files: []string{filepath.Join("examples", "cdc", "docker-compose.yml")}, env: map[string]string{},
			project: "queuebox-cdc", services: []string{"migrate", "postgres", "publication", "queuebox", "receiver"},
			check: func(t *testing.T, p *types.Project) {
				dep := service(t, p, "queuebox").DependsOn["publication"]
				if dep.Condition != types.ServiceConditionCompletedSuccessfully {
					t.Errorf("queuebox depends on publication with %q, want %q", dep.Condition, types.ServiceConditionCompletedSuccessfully)
				}
			},
		},
		{
			name: "http-fanout", files: []string{filepath.Join("examples", "http-fanout", "docker-compose.yml")}, env: map[string]string{},
			project: "queuebox-http-fanout", services: []string{"analytics", "audit", "postgres", "queuebox"},
		},
	}

	covered := map[string]bool{}
	for _, s := range stacks {
		for _, f := range s.files {
			covered[f] = true
		}
	}
	found := composeFiles(t, root)
	if len(found) == 0 {
		t.Fatal("found no Compose file in the repository")
	}
	for _, f := range found {
		if !covered[f] {
			t.Errorf("%s is a Compose file that no case of this test loads: add it to stacks", f)
		}
	}
	for f := range covered {
		if !slices.Contains(found, f) {
			t.Errorf("%s is loaded by this test but is not a Compose file of the repository", f)
		}
	}

	for _, s := range stacks {
		t.Run(s.name, func(t *testing.T) {
			p := mustLoad(t, root, s.files, s.env)
			if p.Name != s.project {
				t.Errorf("project name %q, want %q", p.Name, s.project)
			}
			if got := sorted(p.ServiceNames()); !slices.Equal(got, s.services) {
				t.Errorf("services %v, want %v", got, s.services)
			}
			if s.check != nil {
				s.check(t, p)
			}

			// Every profile that the files declare enables its own services besides the
			// others, and the files declare no other profile.
			all := mustLoad(t, root, s.files, s.env, "*")
			checkPaths(t, all)
			var declared []string
			for _, svc := range all.Services {
				declared = append(declared, svc.Profiles...)
			}
			if got := sorted(declared); !slices.Equal(got, s.profiles) {
				t.Errorf("declared profiles %v, want %v", got, s.profiles)
			}
			for _, profile := range sorted(declared) {
				want := slices.Clone(s.services)
				for name, svc := range all.Services {
					if slices.Contains(svc.Profiles, profile) {
						want = append(want, name)
					}
				}
				pp := mustLoad(t, root, s.files, s.env, profile)
				if got := sorted(pp.ServiceNames()); !slices.Equal(got, sorted(want)) {
					t.Errorf("profile %s: services %v, want %v", profile, got, sorted(want))
				}
			}
		})
	}
}

// TestComposeRequiredVariables checks that a stack started without its variables stops
// with a message that names the variable to set, as the comments of the files say.
func TestComposeRequiredVariables(t *testing.T) {
	root := repoRoot(t)
	envExample, err := dotenv.Read(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatalf("reading .env.example: %v", err)
	}
	noRelease := maps.Clone(envExample)
	delete(noRelease, "RELEASE_IMAGE")

	for _, c := range []struct {
		name  string
		files []string
		env   map[string]string
		want  string
	}{
		{"root without an env file", []string{"docker-compose.yml"}, map[string]string{}, "for example with --env-file .env.example"},
		{"release without RELEASE_IMAGE", []string{"docker-compose.yml", "docker-compose.release.yml"}, noRelease, "set RELEASE_IMAGE to a released image"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, root, c.files, c.env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
			if err != nil && errors.Is(err, fs.ErrNotExist) {
				t.Errorf("error %v is a missing file, not a missing variable", err)
			}
		})
	}
}
