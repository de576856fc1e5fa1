package deploy_test

import (
	"fmt"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/service"
)

// adminPaths are the paths that the admin function serves (spec/26-http-api.md, the
// management port without /metrics), and the methods that the local management port answers
// on them.
var adminPaths = map[string]string{
	"/health":               http.MethodGet,
	"/health/live":          http.MethodGet,
	"/health/ready":         http.MethodGet,
	"/admin/transform/test": http.MethodPost,
	"/admin/replay":         http.MethodPost,
}

// httpAPIRoute is one HttpApi event of a function.
type httpAPIRoute struct {
	function, event, api, method, path string
	auth                               map[string]any
}

func (tpl *samTemplate) httpAPIRoutes(t *testing.T) []httpAPIRoute {
	t.Helper()
	var out []httpAPIRoute
	for _, fn := range tpl.functions() {
		for evName, e := range mapAt(fn.props, "Events") {
			ev, _ := e.(map[string]any)
			if ev["Type"] != "HttpApi" {
				continue
			}
			props := mapAt(ev, "Properties")
			api, ok := mapAt(props, "ApiId")["Ref"].(string)
			require.True(t, ok, "%s.%s names its API with ApiId: !Ref", fn.id, evName)
			method, _ := props["Method"].(string)
			path, _ := props["Path"].(string)
			out = append(out, httpAPIRoute{function: fn.id, event: evName, api: api, method: method, path: path, auth: mapAt(props, "Auth")})
		}
	}
	return out
}

// routeMatches reports whether API Gateway routes method path to r: ANY matches every method,
// a {proxy+} segment one or more segments, a {name} segment one.
func routeMatches(r httpAPIRoute, method, path string) bool {
	if r.method != "ANY" && r.method != method {
		return false
	}
	pattern := "^" + regexp.QuoteMeta(r.path) + "$"
	pattern = strings.ReplaceAll(pattern, `\{proxy\+\}`, `.+`)
	pattern = regexp.MustCompile(`\\\{[A-Za-z0-9_]+\\\}`).ReplaceAllString(pattern, `[^/]+`)
	return regexp.MustCompile(pattern).MatchString(path)
}

// TestTemplateAdminAPI checks the admin function's API: a second HTTP API whose every route
// needs IAM authorization (AWS_IAM, SigV4), which carries the admin and health paths and no
// other function's routes, while the inbox API stays open for webhook senders and carries no
// admin or health path. A policy grants execute-api:Invoke on it, and an output gives its URL.
func TestTemplateAdminAPI(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	admin := tpl.resources["AdminApi"]
	require.Equal(t, "AWS::Serverless::HttpApi", admin["Type"], "AdminApi is an HTTP API")
	auth := mapAt(mapAt(admin, "Properties"), "Auth")
	assert.Equal(t, true, auth["EnableIamAuthorizer"], "AdminApi Auth.EnableIamAuthorizer")
	assert.Equal(t, "AWS_IAM", auth["DefaultAuthorizer"], "AdminApi Auth.DefaultAuthorizer")

	routes := tpl.httpAPIRoutes(t)
	var adminRoutes []httpAPIRoute
	for _, r := range routes {
		if r.function == "AdminFunction" {
			assert.Equal(t, "AdminApi", r.api, "AdminFunction.%s is on the IAM-authorized API", r.event)
			adminRoutes = append(adminRoutes, r)
		}
		if r.api == "AdminApi" {
			assert.Equal(t, "AdminFunction", r.function, "%s.%s: only the admin function is on AdminApi", r.function, r.event)
			// A route-level Authorizer (NONE above all) would override the API's AWS_IAM.
			assert.NotContains(t, r.auth, "Authorizer", "%s.%s keeps the API's IAM authorization", r.function, r.event)
		}
		apiAuth := mapAt(mapAt(tpl.resources[r.api], "Properties"), "Auth")
		if r.api != "AdminApi" {
			assert.NotEqual(t, "AWS_IAM", apiAuth["DefaultAuthorizer"], "%s: webhook senders cannot sign with SigV4", r.api)
		}
	}
	require.NotEmpty(t, adminRoutes)
	for path, method := range adminPaths {
		served := false
		for _, r := range routes {
			if routeMatches(r, method, path) {
				assert.Equal(t, "AdminFunction", r.function, "%s %s reaches %s.%s", method, path, r.function, r.event)
				served = served || r.function == "AdminFunction"
			}
		}
		assert.True(t, served, "%s %s has a route to the admin function", method, path)
	}
	for _, r := range routes {
		assert.False(t, routeMatches(r, http.MethodGet, "/metrics"), "%s.%s: /metrics does not exist on Lambda", r.function, r.event)
	}

	policy := tpl.resources["AdminInvokePolicy"]
	require.Equal(t, "AWS::IAM::ManagedPolicy", policy["Type"])
	stmts, _ := mapAt(mapAt(policy, "Properties"), "PolicyDocument")["Statement"].([]any)
	require.Len(t, stmts, 1)
	st, _ := stmts[0].(map[string]any)
	assert.Equal(t, "Allow", st["Effect"])
	assert.Equal(t, "execute-api:Invoke", st["Action"])
	res, ok := tpl.values(t, st["Resource"])
	require.True(t, ok)
	assert.Equal(t, []string{"arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<AdminApi>/*"}, res)

	outputs := mapAt(tpl.raw, "Outputs")
	url, ok := tpl.values(t, mapAt(outputs, "AdminEndpoint")["Value"])
	require.True(t, ok, "the AdminEndpoint output")
	assert.Equal(t, []string{"https://<AdminApi>.execute-api.<AWS::Region>.<AWS::URLSuffix>/"}, url)
}

// resolveWith returns the string that v becomes once CloudFormation resolves it with the
// given parameter values (the others take their default or sample): present is false for
// AWS::NoValue. Fn::If evaluates its condition.
func (tpl *samTemplate) resolveWith(t *testing.T, v any, params map[string]string) (value string, present bool) {
	t.Helper()
	if m, ok := v.(map[string]any); ok {
		if ref, isRef := m["Ref"].(string); isRef && len(m) == 1 {
			if ref == "AWS::NoValue" {
				return "", false
			}
			if p, set := params[ref]; set {
				return p, true
			}
		}
		if args, isIf := m["Fn::If"].([]any); isIf && len(m) == 1 && len(args) == 3 {
			if tpl.condition(t, fmt.Sprint(args[0]), params) {
				return tpl.resolveWith(t, args[1], params)
			}
			return tpl.resolveWith(t, args[2], params)
		}
		if s, isSub := m["Fn::Sub"].(string); isSub && len(m) == 1 {
			for name, p := range params {
				s = strings.ReplaceAll(s, "${"+name+"}", p)
			}
			return tpl.substitute(t, s), true
		}
	}
	vals, ok := tpl.values(t, v)
	require.True(t, ok, "%v resolves", v)
	require.Len(t, vals, 1, "%v has one value", v)
	return vals[0], true
}

// condition evaluates the named condition (Fn::Equals, Fn::Not, Fn::And, Fn::Or, Condition).
func (tpl *samTemplate) condition(t *testing.T, name string, params map[string]string) bool {
	t.Helper()
	c, ok := tpl.conditions[name]
	require.True(t, ok, "condition %s", name)
	return tpl.evalCondition(t, c, params)
}

func (tpl *samTemplate) evalCondition(t *testing.T, c any, params map[string]string) bool {
	t.Helper()
	m, ok := c.(map[string]any)
	require.True(t, ok, "condition %v is a function", c)
	require.Len(t, m, 1, "condition %v", c)
	for fn, arg := range m {
		switch fn {
		case "Condition":
			return tpl.condition(t, fmt.Sprint(arg), params)
		}
		args, ok := arg.([]any)
		require.True(t, ok, "%s takes a list", fn)
		switch fn {
		case "Fn::Equals":
			require.Len(t, args, 2)
			a, _ := tpl.resolveWith(t, args[0], params)
			b, _ := tpl.resolveWith(t, args[1], params)
			return a == b
		case "Fn::Not":
			require.Len(t, args, 1)
			return !tpl.evalCondition(t, args[0], params)
		case "Fn::And", "Fn::Or":
			all, any := true, false
			for _, a := range args {
				v := tpl.evalCondition(t, a, params)
				all, any = all && v, any || v
			}
			if fn == "Fn::And" {
				return all
			}
			return any
		}
		t.Fatalf("condition function %s is not evaluated by this test", fn)
	}
	return false
}

// TestTemplateAdminConfiguration loads the admin function's environment as the configuration
// loader does, with AdminEnabled true and false: on, the admin routes are enabled with an
// api-key admin.auth whose key is a Secrets Manager reference and whose header is not
// Authorization (the SigV4 signature's header); off, no admin secret is read. No function
// ever sets admin.insecure.
func TestTemplateAdminConfiguration(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	var admin *samFunction
	for _, fn := range tpl.functions() {
		assert.NotContains(t, fn.env(), "QUEUEBOX_ADMIN_INSECURE", "%s: admin.insecure is for a local test only", fn.id)
		if fn.id == "AdminFunction" {
			admin = &fn
		}
	}
	require.NotNil(t, admin, "template.yaml has AdminFunction")
	assert.Equal(t, "false", tpl.parameters["AdminEnabled"]["Default"], "admin.enabled defaults to false, as in spec/23")

	noFile := func(name string) ([]byte, error) { return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist) }
	for _, enabled := range []string{"true", "false"} {
		t.Run("AdminEnabled="+enabled, func(t *testing.T) {
			params := map[string]string{"AdminEnabled": enabled}
			env := map[string]string{}
			for name, raw := range admin.env() {
				v, present := tpl.resolveWith(t, raw, params)
				if !present {
					continue
				}
				if strings.HasPrefix(name, "QUEUEBOX_ADMIN_AUTH_") && secretKey.MatchString(strings.TrimPrefix(name, "QUEUEBOX_ADMIN_AUTH_")) {
					assert.Regexp(t, dynamicSecret, v, "%s is a Secrets Manager reference", name)
					assert.Contains(t, v, "{{resolve:secretsmanager:queuebox/admin:SecretString:key}}", name)
				}
				if dynamicSecret.MatchString(v) {
					v = "resolved-by-cloudformation"
				}
				env[name] = v
			}
			cfg, warnings, err := service.Load(service.LoadOptions{Env: env, ReadFile: noFile})
			require.NoError(t, err, "the admin function's configuration loads")
			assert.Empty(t, warnings)
			if enabled == "false" {
				assert.False(t, cfg.Admin.Enabled)
				assert.Nil(t, cfg.Admin.Auth, "no admin.auth and no admin secret when the admin routes are off")
				for name := range env {
					assert.False(t, strings.HasPrefix(name, "QUEUEBOX_ADMIN_AUTH_"), "%s is not set when the admin routes are off", name)
				}
				return
			}
			assert.True(t, cfg.Admin.Enabled)
			assert.False(t, cfg.Admin.Insecure)
			require.NotNil(t, cfg.Admin.Auth, "admin.auth")
			require.Equal(t, config.AuthAPIKey, cfg.Admin.Auth.Kind, "admin.auth is an api-key")
			assert.Equal(t, "resolved-by-cloudformation", cfg.Admin.Auth.APIKey.Key.Reveal())
			assert.Equal(t, "X-API-Key", cfg.Admin.Auth.CredentialHeader())
			assert.NotEqual(t, "authorization", strings.ToLower(cfg.Admin.Auth.CredentialHeader()),
				"the admin credential cannot travel in Authorization, which SigV4 occupies")
		})
	}
}
