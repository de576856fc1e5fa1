package deploy_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/deploy/lambdazip"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/specdocs"
)

// envPage is spec/24-environment-variables.md, read with specdocs.
const envPage = "24-environment-variables.md"

// samTemplate is template.yaml, parsed.
type samTemplate struct {
	raw        map[string]any
	parameters map[string]map[string]any
	conditions map[string]any
	resources  map[string]map[string]any
	globals    map[string]any // Globals.Function
}

func loadTemplate(t *testing.T) *samTemplate {
	t.Helper()
	raw, err := parseCFN(readRepoFile(t, "template.yaml"))
	require.NoError(t, err, "template.yaml")
	tpl := &samTemplate{raw: raw, parameters: map[string]map[string]any{}, resources: map[string]map[string]any{}}
	for name, p := range mapAt(raw, "Parameters") {
		m, ok := p.(map[string]any)
		require.True(t, ok, "parameter %s is a map", name)
		tpl.parameters[name] = m
	}
	for name, r := range mapAt(raw, "Resources") {
		m, ok := r.(map[string]any)
		require.True(t, ok, "resource %s is a map", name)
		tpl.resources[name] = m
	}
	tpl.conditions = mapAt(raw, "Conditions")
	tpl.globals = mapAt(mapAt(raw, "Globals"), "Function")
	return tpl
}

// samFunction is an AWS::Serverless::Function with the Globals merged in, as SAM merges
// them: a key of the function wins, and maps merge key by key.
type samFunction struct {
	id       string
	props    map[string]any
	metadata map[string]any
}

func (tpl *samTemplate) functions() []samFunction {
	var fns []samFunction
	for id, r := range tpl.resources {
		if r["Type"] != "AWS::Serverless::Function" {
			continue
		}
		fns = append(fns, samFunction{id: id, props: mergeGlobals(tpl.globals, mapAt(r, "Properties")), metadata: mapAt(r, "Metadata")})
	}
	slices.SortFunc(fns, func(a, b samFunction) int { return strings.Compare(a.id, b.id) })
	return fns
}

func mergeGlobals(globals, props map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range globals {
		out[k] = v
	}
	for k, v := range props {
		gm, gok := out[k].(map[string]any)
		pm, pok := v.(map[string]any)
		if gok && pok {
			out[k] = mergeGlobals(gm, pm)
			continue
		}
		out[k] = v
	}
	return out
}

// env returns the function's environment variables.
func (f samFunction) env() map[string]any {
	return mapAt(mapAt(f.props, "Environment"), "Variables")
}

// parameterSamples are values of the parameters without a default, for the checks that need
// a value.
var parameterSamples = map[string]string{
	"DatabaseUrl":      "jdbc:postgresql://db.internal:5432/queuebox",
	"SubnetIds":        "subnet-0123456789abcdef0",
	"SecurityGroupIds": "sg-0123456789abcdef0",
}

// values returns the strings that v can be once CloudFormation resolves it: a literal, the
// default (or sample) of a parameter, both branches of Fn::If, the text of a Sub. A dynamic
// reference stays as written. AWS::NoValue gives nothing. ok is false for a form this test
// does not resolve.
func (tpl *samTemplate) values(t *testing.T, v any) (vals []string, ok bool) {
	t.Helper()
	switch x := v.(type) {
	case string:
		return []string{x}, true
	case int:
		return []string{strconv.Itoa(x)}, true
	case bool:
		return []string{strconv.FormatBool(x)}, true
	case map[string]any:
		if ref, isRef := x["Ref"].(string); isRef && len(x) == 1 {
			if ref == "AWS::NoValue" {
				return nil, true
			}
			p, isParam := tpl.parameters[ref]
			if !isParam {
				return nil, false
			}
			if d, has := p["Default"]; has {
				return tpl.values(t, d)
			}
			s, has := parameterSamples[ref]
			require.True(t, has, "parameter %s has no default: add a sample value to parameterSamples", ref)
			return []string{s}, true
		}
		if s, isSub := x["Fn::Sub"].(string); isSub && len(x) == 1 {
			return []string{tpl.substitute(t, s)}, true
		}
		if args, isIf := x["Fn::If"].([]any); isIf && len(x) == 1 && len(args) == 3 {
			a, aok := tpl.values(t, args[1])
			b, bok := tpl.values(t, args[2])
			return append(a, b...), aok && bok
		}
	}
	return nil, false
}

// substitute replaces the ${Name} variables of a Sub string as CloudFormation does: a
// parameter by its default (or sample), a resource attribute or a pseudo parameter by its
// name in angle brackets, and ${!Literal} by ${Literal}.
func (tpl *samTemplate) substitute(t *testing.T, s string) string {
	t.Helper()
	return regexp.MustCompile(`\$\{([^}]*)\}`).ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		if _, isParam := tpl.parameters[name]; isParam {
			if vals, ok := tpl.values(t, map[string]any{"Ref": name}); ok && len(vals) > 0 {
				return vals[0]
			}
		}
		return "<" + name + ">"
	})
}

// makeTargets returns the build-<LogicalId> targets of a Makefile and the function folder
// that each builds with $(call LAMBDA_ARTIFACT,<name>).
func makeTargets(t *testing.T, makefile string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(makefile)
	require.NoError(t, err)
	re := regexp.MustCompile(`(?m)^build-([A-Za-z0-9]+):[ \t]*\n\t\$\(call LAMBDA_ARTIFACT,([a-z0-9_-]+)\)[ \t]*$`)
	targets := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(data), -1) {
		targets[m[1]] = m[2]
	}
	return targets
}

// repoFunctions returns the function folders of the repository: functions/<name>/main.go.
func repoFunctions(t *testing.T) []string {
	t.Helper()
	names, err := lambdazip.Functions(repoRoot)
	require.NoError(t, err)
	require.NotEmpty(t, names)
	return names
}

func TestTemplateHeader(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	assert.Equal(t, "2010-09-09", tpl.raw["AWSTemplateFormatVersion"])
	assert.Equal(t, "AWS::Serverless-2016-10-31", tpl.raw["Transform"])
	require.NotEmpty(t, tpl.functions())
}

// TestTemplateFunctionsBuild checks every function's runtime, and that `sam build` finds its
// code: CodeUri is a folder with a Makefile that has the build-<LogicalId> target, which
// builds a functions/<name>/main.go that exists. Every function of the repository is deployed.
func TestTemplateFunctionsBuild(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	deployed := map[string]string{} // function folder -> logical id
	for _, fn := range tpl.functions() {
		t.Run(fn.id, func(t *testing.T) {
			assert.Equal(t, "provided.al2023", fn.props["Runtime"])
			assert.Equal(t, []any{"arm64"}, fn.props["Architectures"])
			assert.Equal(t, "bootstrap", fn.props["Handler"])
			assert.Equal(t, "makefile", fn.metadata["BuildMethod"], "Metadata.BuildMethod")

			codeURI, ok := fn.props["CodeUri"].(string)
			require.True(t, ok, "CodeUri is a local path")
			dir := filepath.Join(repoRoot, codeURI)
			st, err := os.Stat(dir)
			require.NoError(t, err, "CodeUri %s exists", codeURI)
			require.True(t, st.IsDir(), "CodeUri %s is a folder", codeURI)
			targets := makeTargets(t, filepath.Join(dir, "Makefile"))
			name, ok := targets[fn.id]
			require.True(t, ok, "the Makefile of CodeUri %s has the target build-%s", codeURI, fn.id)
			_, err = os.Stat(filepath.Join(dir, "functions", name, "main.go"))
			require.NoError(t, err, "build-%s builds functions/%s/main.go", fn.id, name)
			deployed[name] = fn.id
		})
	}
	for _, name := range repoFunctions(t) {
		assert.Contains(t, deployed, name,
			"functions/%s is not in template.yaml: add its function, its build-<LogicalId> target in the Makefile, and its events (deploy/README.md)", name)
	}
	for _, name := range []string{"poll", "relay", "retention", "inbox", "admin"} {
		assert.Contains(t, deployed, name)
	}
}

// TestMakefileBuildsLikeLambdazip checks that `make lambda` and the build-* targets use the
// same environment and flags as lambdazip.Build (the size benchmark).
func TestMakefileBuildsLikeLambdazip(t *testing.T) {
	t.Parallel()
	mk := string(readRepoFile(t, "Makefile"))
	varValue := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `\s*:=\s*(.*)$`).FindStringSubmatch(mk)
		require.NotNil(t, m, "the Makefile sets %s", name)
		return strings.TrimSpace(m[1])
	}
	assert.Equal(t, strings.Join(lambdazip.BuildEnv, " "), varValue("LAMBDA_ENV"))
	var flags []string
	for _, f := range lambdazip.BuildFlags {
		if strings.Contains(f, " ") {
			f = strconv.Quote(f)
		}
		flags = append(flags, f)
	}
	// The Makefile also stamps the version (queuebox version) into the functions' -ldflags,
	// and adds the tags of the broker destinations that LAMBDA_DESTINATIONS leaves out.
	makeFlags := varValue("LAMBDA_FLAGS")
	assert.Contains(t, makeFlags, ` $(VERSION_LDFLAGS)"`, "make lambda stamps the version")
	makeFlags = strings.Replace(makeFlags, ` $(VERSION_LDFLAGS)"`, `"`, 1)
	assert.Equal(t, strings.Join(flags, " "), strings.Replace(makeFlags, "$(LAMBDA_TAGS)", lambdazip.BuildTag, 1))
	assert.Contains(t, varValue("LAMBDA_TAGS"), "$(strip "+lambdazip.BuildTag+" $(LAMBDA_LEFT_OUT))")
	var kinds []string
	for _, c := range lambdazip.Connectors {
		kinds = append(kinds, c.Kind)
		assert.Equal(t, "queuebox_no_"+c.Kind, c.Tag, "LAMBDA_LEFT_OUT makes the tag of %s from its kind", c.Kind)
	}
	assert.Equal(t, strings.Join(kinds, " "), varValue("LAMBDA_BROKERS"))
}

// documentedVariables returns the key paths of the variables that spec/24 lists, normalised
// by normalKey, and true; or nil and false when the spec documents are absent (specdocs.Optional
// logged how to run the comparison), so that the test checks the rest.
func documentedVariables(t *testing.T) (map[string]bool, bool) {
	t.Helper()
	dir, ok := specdocs.Optional(t)
	if !ok {
		return nil, false
	}
	page, err := os.ReadFile(filepath.Join(dir, envPage))
	require.NoError(t, err, "reading the environment variables page of the specification")
	row := regexp.MustCompile("^\\|\\s*`[^`]*`\\s*\\|\\s*`(QUEUEBOX_[A-Z0-9_]+)`\\s*\\|")
	keys := map[string]bool{}
	for _, line := range strings.Split(string(page), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			path, ok := config.EnvKeyPath(m[1])
			require.True(t, ok, "%s of spec/24 names a key", m[1])
			keys[normalKey(path)] = true
		}
	}
	require.Contains(t, keys, "database.url", "the page still has its tables")
	return keys, true
}

var (
	listIndex   = regexp.MustCompile(`\[[0-9]+\]`)
	mapKeyLevel = regexp.MustCompile(`^(destinations|sources)\.[^.\[]+`)
	headerLevel = regexp.MustCompile(`^(destinations\.\*\.headers)\.[^.\[]+`)
)

// normalKey replaces what a deployment names itself in a key path (the name of a destination
// or a source, a header name, a list index) with *, so that the path compares with the
// documented one (spec/24 uses orders and 0).
func normalKey(path string) string {
	path = strings.ToLower(path)
	path = listIndex.ReplaceAllString(path, "[*]")
	path = mapKeyLevel.ReplaceAllString(path, "$1.*")
	path = headerLevel.ReplaceAllString(path, "$1.*")
	return path
}

// secretKey matches the last level of a key path that holds a credential (key: the key of an
// api-key auth block, such as admin.auth.key).
var secretKey = regexp.MustCompile(`(?i)(password|passphrase|secret|token|apikey|privatekey|credential|^key$)`)

// dynamicSecret matches a Secrets Manager dynamic reference as the whole value.
var dynamicSecret = regexp.MustCompile(`^\{\{resolve:secretsmanager:[^:{}]+(:SecretString(:[^:{}]*(:[^:{}]*(:[^:{}]*)?)?)?)?\}\}$`)

// TestTemplateEnvironment checks every environment variable of every function: a QUEUEBOX_
// variable is a key that spec/24 documents, and the configuration loader takes the whole
// environment without a warning; a variable of a credential is a Secrets Manager dynamic
// reference; a LAMBDA_ variable is a setting of the Lambda driver with a valid value; there
// is no other variable.
func TestTemplateEnvironment(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	documented, compare := documentedVariables(t)
	for _, fn := range tpl.functions() {
		t.Run(fn.id, func(t *testing.T) {
			env := fn.env()
			require.NotEmpty(t, env)
			loadEnv := map[string]string{}
			settingsEnv := map[string][]string{}
			for name, raw := range env {
				vals, ok := tpl.values(t, raw)
				require.True(t, ok, "%s has a value that this test resolves (a literal, a parameter, Sub or If)", name)
				switch {
				case name == config.ConfigFileVariable:
					for _, v := range vals {
						assert.True(t, v == "" || v == lambdazip.ConfigPath, "%s is %q: the bundled file is %s", name, v, lambdazip.ConfigPath)
					}
				case strings.HasPrefix(name, config.EnvPrefix):
					path, ok := config.EnvKeyPath(name)
					require.True(t, ok, "%s names a key", name)
					if compare {
						assert.True(t, documented[normalKey(path)], "%s sets %s, which spec/24 does not document", name, path)
					}
					levels := strings.Split(path, ".")
					if secretKey.MatchString(levels[len(levels)-1]) {
						for _, v := range vals {
							assert.Regexp(t, dynamicSecret, v, "%s holds a credential: it must be a {{resolve:secretsmanager:...}} reference", name)
						}
					}
					if len(vals) > 0 {
						loadEnv[name] = vals[0]
						if dynamicSecret.MatchString(vals[0]) {
							loadEnv[name] = "resolved-by-cloudformation"
						}
					}
				case name == lambdafn.ModeVariable || name == lambdafn.MarginVariable:
					settingsEnv[name] = vals
				default:
					t.Errorf("%s is neither a QUEUEBOX_ configuration variable nor a setting of the Lambda driver", name)
				}
			}
			for name, vals := range settingsEnv {
				for _, v := range vals {
					_, err := lambdafn.ParseSettings(map[string]string{name: v})
					assert.NoError(t, err, "%s=%q", name, v)
				}
			}
			noFile := func(name string) ([]byte, error) { return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist) }
			_, warnings, err := service.Load(service.LoadOptions{Env: loadEnv, ReadFile: noFile})
			require.NoError(t, err, "the configuration of %s loads", fn.id)
			assert.Empty(t, warnings, "the configuration of %s loads without a warning", fn.id)
		})
	}
}

// TestTemplateParameters checks that every default and sample satisfies its parameter's
// constraints, and that a parameter with a secret-looking name is NoEcho (a parameter that
// names a secret, ending in Name, Arn or Id, is not a secret itself).
func TestTemplateParameters(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	secretName := regexp.MustCompile(`(?i)(password|passwd|passphrase|secret|token|apikey|privatekey|credential)`)
	reference := regexp.MustCompile(`(Name|Arn|Id)$`)
	for name, p := range tpl.parameters {
		if secretName.MatchString(name) && !reference.MatchString(name) {
			assert.Equal(t, true, p["NoEcho"], "parameter %s looks like a secret: set NoEcho: true (better: a dynamic reference)", name)
			assert.NotContains(t, p, "Default", "parameter %s looks like a secret: it must have no default", name)
		}
		vals, ok := tpl.values(t, map[string]any{"Ref": name})
		require.True(t, ok)
		for _, v := range vals {
			if allowed, ok := p["AllowedValues"].([]any); ok {
				var as []string
				for _, a := range allowed {
					s, _ := tpl.values(t, a)
					as = append(as, s...)
				}
				assert.Contains(t, as, v, "parameter %s: %q is an allowed value", name, v)
			}
			if pattern, ok := p["AllowedPattern"].(string); ok {
				assert.Regexp(t, regexp.MustCompile(pattern), v, "parameter %s: %q matches AllowedPattern", name, v)
			}
			if p["Type"] == "Number" {
				n, err := strconv.Atoi(v)
				require.NoError(t, err, "parameter %s is a number", name)
				if minV, ok := p["MinValue"].(int); ok {
					assert.GreaterOrEqual(t, n, minV, "parameter %s", name)
				}
			}
		}
	}
}

// TestTemplateSecrets checks every dynamic reference of the template: Secrets Manager only
// (never SSM plain parameters for a secret), well formed.
func TestTemplateSecrets(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	var refs []string
	walkStrings(tpl.raw, func(s string) {
		s = tpl.substitute(t, s) // a reference built with !Sub
		for _, m := range regexp.MustCompile(`\{\{resolve:[^}]*\}\}`).FindAllString(s, -1) {
			refs = append(refs, m)
		}
		if strings.Contains(s, "{{resolve:") && !strings.Contains(s, "}}") {
			t.Errorf("broken dynamic reference in %q", s)
		}
	})
	require.NotEmpty(t, refs, "the database credentials come from Secrets Manager")
	for _, r := range refs {
		assert.Regexp(t, dynamicSecret, r)
	}
	env := mapAt(mapAt(tpl.globals, "Environment"), "Variables")
	for _, name := range []string{"QUEUEBOX_DATABASE_USERNAME", "QUEUEBOX_DATABASE_PASSWORD"} {
		vals, ok := tpl.values(t, env[name])
		require.True(t, ok)
		require.NotEmpty(t, vals, name)
		for _, v := range vals {
			assert.Regexp(t, dynamicSecret, v, name)
		}
	}
}

// walkStrings calls f with every string of v, keys included.
func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case map[string]any:
		for k, e := range x {
			f(k)
			walkStrings(e, f)
		}
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	}
}

// TestTemplateEvents checks the schedules of poll, relay and retention and the HTTP API
// routes of the inbox and the admin function (TestTemplateAdminAPI checks the admin API).
func TestTemplateEvents(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	schedules := map[string]int{}
	var routes []string
	for _, fn := range tpl.functions() {
		for evName, e := range mapAt(fn.props, "Events") {
			ev, ok := e.(map[string]any)
			require.True(t, ok)
			props := mapAt(ev, "Properties")
			switch ev["Type"] {
			case "Schedule", "ScheduleV2":
				key := "Schedule"
				if ev["Type"] == "ScheduleV2" {
					key = "ScheduleExpression"
				}
				vals, ok := tpl.values(t, props[key])
				require.True(t, ok, "%s.%s has a schedule expression", fn.id, evName)
				require.NotEmpty(t, vals)
				for _, v := range vals {
					assert.NoError(t, checkSchedule(v), "%s.%s", fn.id, evName)
				}
				schedules[fn.id]++
			case "HttpApi":
				method, _ := props["Method"].(string)
				path, _ := props["Path"].(string)
				assert.NoError(t, checkRoute(method, path), "%s.%s", fn.id, evName)
				assert.Equal(t, "2.0", props["PayloadFormatVersion"], "lambdafn.HTTPHandler reads payload format 2.0")
				api, ok := mapAt(props, "ApiId")["Ref"].(string)
				require.True(t, ok, "%s.%s names its API with ApiId: !Ref", fn.id, evName)
				assert.Equal(t, "AWS::Serverless::HttpApi", tpl.resources[api]["Type"], "ApiId %s", api)
				routes = append(routes, fn.id+" "+method+" "+path)
			default:
				t.Errorf("%s.%s: event type %v is not checked by this test", fn.id, evName, ev["Type"])
			}
		}
	}
	for _, id := range []string{"PollFunction", "RelayFunction", "RetentionFunction"} {
		assert.Equal(t, 1, schedules[id], "%s has one schedule", id)
	}
	assert.Contains(t, routes, "InboxFunction POST /inbox/{proxy+}")
	for _, r := range []string{"ANY /health", "ANY /health/{proxy+}", "ANY /admin/{proxy+}"} {
		assert.Contains(t, routes, "AdminFunction "+r)
	}
}

// TestTemplateLimits checks the reserved concurrency (the replica cap) of poll and relay, the
// log group with a retention of every function, and a timeout that leaves the margin room.
func TestTemplateLimits(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	for _, fn := range tpl.functions() {
		t.Run(fn.id, func(t *testing.T) {
			if fn.id == "PollFunction" || fn.id == "RelayFunction" {
				assert.Contains(t, fn.props, "ReservedConcurrentExecutions", "the replica cap")
			}
			group, ok := mapAt(mapAt(fn.props, "LoggingConfig"), "LogGroup")["Ref"].(string)
			require.True(t, ok, "LoggingConfig.LogGroup is a !Ref")
			lg := tpl.resources[group]
			require.Equal(t, "AWS::Logs::LogGroup", lg["Type"], "%s is a log group", group)
			assert.Contains(t, mapAt(lg, "Properties"), "RetentionInDays")
			timeout, ok := fn.props["Timeout"].(int)
			require.True(t, ok, "Timeout is a number of seconds")
			assert.Greater(t, timeout, int(lambdafn.DefaultMargin.Seconds()), "the timeout is longer than the deadline margin")
		})
	}
}

// TestTemplateCaptureNodePermission checks the policy that lets the capture node invoke poll
// and relay.
func TestTemplateCaptureNodePermission(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	granted := map[string]bool{}
	for _, r := range tpl.resources {
		if r["Type"] != "AWS::IAM::ManagedPolicy" {
			continue
		}
		stmts, _ := mapAt(mapAt(r, "Properties"), "PolicyDocument")["Statement"].([]any)
		for _, s := range stmts {
			st, _ := s.(map[string]any)
			if st["Effect"] != "Allow" || st["Action"] != "lambda:InvokeFunction" {
				continue
			}
			res, _ := st["Resource"].([]any)
			for _, x := range res {
				m, _ := x.(map[string]any)
				if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) == 2 && ga[1] == "Arn" {
					granted[fmt.Sprint(ga[0])] = true
				}
			}
		}
	}
	assert.True(t, granted["PollFunction"], "the capture node may invoke poll")
	assert.True(t, granted["RelayFunction"], "the capture node may invoke relay")
}

// TestTemplateReferences checks that every Ref, GetAtt, Sub variable and condition names a
// parameter, a resource, a pseudo parameter or a condition of the template.
func TestTemplateReferences(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	known := func(name string) bool {
		if strings.HasPrefix(name, "AWS::") {
			return slices.Contains([]string{"AWS::AccountId", "AWS::NoValue", "AWS::Partition", "AWS::Region",
				"AWS::StackId", "AWS::StackName", "AWS::URLSuffix", "AWS::NotificationARNs"}, name)
		}
		_, p := tpl.parameters[name]
		_, r := tpl.resources[name]
		return p || r
	}
	subVar := regexp.MustCompile(`\$\{([^!}][^}]*)\}`)
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["Ref"].(string); ok {
				assert.True(t, known(ref), "!Ref %s names nothing", ref)
			}
			if ga, ok := x["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
				_, r := tpl.resources[fmt.Sprint(ga[0])]
				assert.True(t, r, "!GetAtt %v names no resource", ga[0])
			}
			if s, ok := x["Fn::Sub"].(string); ok {
				for _, m := range subVar.FindAllStringSubmatch(s, -1) {
					name, attr, hasAttr := strings.Cut(m[1], ".")
					if hasAttr && !strings.HasPrefix(m[1], "AWS::") {
						_, r := tpl.resources[name]
						assert.True(t, r, "${%s.%s} names no resource", name, attr)
						continue
					}
					assert.True(t, known(m[1]), "${%s} names nothing", m[1])
				}
			}
			if args, ok := x["Fn::If"].([]any); ok && len(args) == 3 {
				_, c := tpl.conditions[fmt.Sprint(args[0])]
				assert.True(t, c, "!If %v names no condition", args[0])
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(mapAt(tpl.raw, "Resources"))
	walk(mapAt(tpl.raw, "Outputs"))
	walk(tpl.raw["Globals"])
	walk(tpl.conditions)
}
