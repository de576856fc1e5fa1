package deploy_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/capturenode"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/service"
)

// captureTemplate is the capture node's own CloudFormation template.
const captureTemplate = "deploy/capture-node.yaml"

// captureStateDir is where the image keeps the capture state (local/Dockerfile).
const captureStateDir = "/var/lib/queuebox/capture"

func loadCaptureTemplate(t *testing.T) map[string]any {
	t.Helper()
	tpl, err := parseCFN(readRepoFile(t, captureTemplate))
	require.NoError(t, err)
	return tpl
}

// resourcesOfType returns the resources of the type, by logical ID.
func resourcesOfType(tpl map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range mapAt(tpl, "Resources") {
		if rm, ok := r.(map[string]any); ok && rm["Type"] == typ {
			out[id] = rm
		}
	}
	return out
}

// only returns the one resource of the type.
func only(t *testing.T, tpl map[string]any, typ string) (string, map[string]any) {
	t.Helper()
	rs := resourcesOfType(tpl, typ)
	require.Len(t, rs, 1, "one %s", typ)
	for id, r := range rs {
		return id, mapAt(r, "Properties")
	}
	return "", nil
}

// captureContainer returns the one container of the task definition.
func captureContainer(t *testing.T, tpl map[string]any) map[string]any {
	t.Helper()
	_, td := only(t, tpl, "AWS::ECS::TaskDefinition")
	defs, _ := td["ContainerDefinitions"].([]any)
	require.Len(t, defs, 1, "one container")
	c, ok := defs[0].(map[string]any)
	require.True(t, ok)
	return c
}

// nameValues reads a list of {Name, Value} (or {Name, ValueFrom}) maps.
func nameValues(t *testing.T, v any, valueKey string) map[string]any {
	t.Helper()
	list, ok := v.([]any)
	require.True(t, ok, "a list of %s", valueKey)
	out := map[string]any{}
	for _, e := range list {
		m, ok := e.(map[string]any)
		require.True(t, ok)
		name, _ := m["Name"].(string)
		require.NotEmpty(t, name)
		_, dup := out[name]
		require.False(t, dup, "%s twice", name)
		out[name] = m[valueKey]
	}
	return out
}

// sampleValue is what a value becomes at deploy time, for the configuration loader: a
// parameter's default or a sample that satisfies it, an import's sample, a literal as it is.
func sampleValue(t *testing.T, tpl map[string]any, v any) string {
	t.Helper()
	switch x := v.(type) {
	case string:
		return x
	case int, float64, bool:
		return fmt.Sprint(x)
	case map[string]any:
		if ref, ok := x["Ref"].(string); ok {
			if ref == "AWS::Region" {
				return "eu-west-1"
			}
			p := mapAt(mapAt(tpl, "Parameters"), ref)
			require.NotNil(t, p, "Ref %s names a parameter", ref)
			if d, ok := p["Default"]; ok {
				return fmt.Sprint(d)
			}
			switch ref {
			case "DatabaseUrl":
				return "jdbc:postgresql://db.internal:5432/queuebox"
			}
			t.Fatalf("no sample for the parameter %s", ref)
		}
		if _, ok := x["Fn::ImportValue"]; ok {
			return "queuebox-imported-function"
		}
	}
	t.Fatalf("no sample for %v", v)
	return ""
}

// TestCaptureTemplateRunsTheCaptureNode: one Fargate task of the image's capture node, which
// local/Dockerfile builds from capturenode/ and copies into the image.
func TestCaptureTemplateRunsTheCaptureNode(t *testing.T) {
	t.Parallel()
	tpl := loadCaptureTemplate(t)
	assert.Equal(t, "2010-09-09", tpl["AWSTemplateFormatVersion"])

	_, svc := only(t, tpl, "AWS::ECS::Service")
	assert.Equal(t, "FARGATE", svc["LaunchType"])
	assert.EqualValues(t, 1, svc["DesiredCount"], "capture has exactly one owner")
	dc := mapAt(svc, "DeploymentConfiguration")
	assert.EqualValues(t, 100, dc["MaximumPercent"], "the old owner stops before the new one starts")
	assert.EqualValues(t, 0, dc["MinimumHealthyPercent"])
	vpc := mapAt(mapAt(svc, "NetworkConfiguration"), "AwsvpcConfiguration")
	assert.Equal(t, map[string]any{"Ref": "SubnetIds"}, vpc["Subnets"])
	assert.Equal(t, "DISABLED", vpc["AssignPublicIp"])

	_, td := only(t, tpl, "AWS::ECS::TaskDefinition")
	assert.Equal(t, []any{"FARGATE"}, td["RequiresCompatibilities"])
	assert.Equal(t, "awsvpc", td["NetworkMode"])
	c := captureContainer(t, tpl)
	assert.Equal(t, map[string]any{"Ref": "Image"}, c["Image"])
	entry, _ := c["EntryPoint"].([]any)
	require.Len(t, entry, 1)
	assert.Equal(t, "/usr/local/bin/capturenode", entry[0])

	// The image has that program: the Dockerfile builds ./capturenode and copies it there.
	dockerfile := string(readRepoFile(t, "local/Dockerfile"))
	assert.Regexp(t, `go build [^&]*-o /out/bin/capturenode \./capturenode`, dockerfile)
	assert.Regexp(t, `(?m)^COPY --from=build [^\n]*/out/bin/capturenode[^\n]* /usr/local/bin/$`, dockerfile)
	readRepoFile(t, "capturenode/main.go")

	// The health check probes liveness on the port the node listens on.
	env := nameValues(t, c["Environment"], "Value")
	hc := mapAt(c, "HealthCheck")
	cmd, _ := hc["Command"].([]any)
	require.Len(t, cmd, 3)
	assert.Equal(t, "CMD", cmd[0])
	assert.Equal(t, "/usr/local/bin/healthprobe", cmd[1])
	assert.Equal(t, fmt.Sprintf("http://127.0.0.1:%s/health/live", env["QUEUEBOX_SERVER_HTTPPORT"]), cmd[2])
	ports, _ := c["PortMappings"].([]any)
	require.Len(t, ports, 1)
	pm, _ := ports[0].(map[string]any)
	assert.Equal(t, env["QUEUEBOX_SERVER_HTTPPORT"], fmt.Sprint(pm["ContainerPort"]))
}

// TestCaptureTemplateStateVolume: the state directory is an EFS volume mounted where the
// configuration points, through an access point of the image's user.
func TestCaptureTemplateStateVolume(t *testing.T) {
	t.Parallel()
	tpl := loadCaptureTemplate(t)
	c := captureContainer(t, tpl)
	env := nameValues(t, c["Environment"], "Value")
	assert.Equal(t, captureStateDir, env["QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY"])

	mounts, _ := c["MountPoints"].([]any)
	require.Len(t, mounts, 1)
	mount := mounts[0].(map[string]any)
	assert.Equal(t, captureStateDir, mount["ContainerPath"])
	assert.Equal(t, false, mount["ReadOnly"])

	_, td := only(t, tpl, "AWS::ECS::TaskDefinition")
	vols, _ := td["Volumes"].([]any)
	require.Len(t, vols, 1)
	vol := vols[0].(map[string]any)
	assert.Equal(t, mount["SourceVolume"], vol["Name"])
	efs := mapAt(vol, "EFSVolumeConfiguration")
	fsID, _ := only(t, tpl, "AWS::EFS::FileSystem")
	apID, ap := only(t, tpl, "AWS::EFS::AccessPoint")
	assert.Equal(t, map[string]any{"Ref": fsID}, efs["FilesystemId"])
	assert.Equal(t, "ENABLED", efs["TransitEncryption"])
	assert.Equal(t, map[string]any{"Ref": apID}, mapAt(efs, "AuthorizationConfig")["AccessPointId"])

	// The access point writes as the image's user queuebox (local/Dockerfile: uid 10001).
	assert.Equal(t, "10001", mapAt(ap, "PosixUser")["Uid"])
	assert.Equal(t, "10001", mapAt(mapAt(ap, "RootDirectory"), "CreationInfo")["OwnerUid"])
	assert.Contains(t, string(readRepoFile(t, "local/Dockerfile")), "queuebox:x:10001:10001:")

	// The file system outlives the stack, and every subnet of the task reaches it.
	fsRes := mapAt(mapAt(tpl, "Resources"), fsID)
	assert.Equal(t, "Retain", fsRes["DeletionPolicy"])
	targets := resourcesOfType(tpl, "AWS::EFS::MountTarget")
	assert.Len(t, targets, 2, "one mount target per subnet (two subnets)")
}

// TestCaptureTemplateEnvironment: every QUEUEBOX_ variable is a documented key, the CAPTURE_
// variables are the node's settings, and the configuration loader and the node take the
// environment (with the secrets) as the task gets it.
func TestCaptureTemplateEnvironment(t *testing.T) {
	t.Parallel()
	tpl := loadCaptureTemplate(t)
	c := captureContainer(t, tpl)
	env := nameValues(t, c["Environment"], "Value")
	secrets := nameValues(t, c["Secrets"], "ValueFrom")
	documented, compare := documentedVariables(t)
	nodeVars := []string{capturenode.PollFunctionVariable, capturenode.RelayFunctionVariable, capturenode.WakeIntervalVariable, capturenode.LambdaEndpointVariable}

	sample := map[string]string{}
	for name, v := range env {
		switch {
		case strings.HasPrefix(name, "QUEUEBOX_"):
			path, ok := config.EnvKeyPath(name)
			require.True(t, ok, "%s names a configuration key", name)
			if compare {
				assert.True(t, documented[normalKey(path)], "%s (%s) is documented in spec/24", name, path)
			}
			assert.False(t, secretKey.MatchString(path), "%s is a credential: it belongs in Secrets", name)
		case slices.Contains(nodeVars, name), name == "AWS_REGION":
		default:
			t.Errorf("the variable %s is neither a configuration key nor a setting of the capture node", name)
		}
		sample[name] = sampleValue(t, tpl, v)
	}
	// The credentials come from Secrets Manager through ECS, never from the environment.
	require.ElementsMatch(t, []string{"QUEUEBOX_DATABASE_USERNAME", "QUEUEBOX_DATABASE_PASSWORD"}, keys(secrets))
	for name, v := range secrets {
		sub, ok := v.(map[string]any)["Fn::Sub"].(string)
		require.True(t, ok, "%s is a Sub of the secret's ARN", name)
		key := strings.ToLower(strings.TrimPrefix(name, "QUEUEBOX_DATABASE_"))
		assert.Equal(t, "${DatabaseSecretArn}:"+key+"::", sub, "%s reads the key %s of the secret", name, key)
		sample[name] = "secret-value"
	}
	p := mapAt(mapAt(tpl, "Parameters"), "DatabaseSecretArn")
	require.NotNil(t, p)
	_, hasDefault := p["Default"]
	assert.False(t, hasDefault, "the secret has no default")

	cfg, warnings, err := service.Load(service.LoadOptions{Env: sample})
	require.NoError(t, err, "the task's environment is a valid configuration")
	assert.Empty(t, warnings)
	assert.True(t, cfg.Outbox.Capture.Enabled)
	assert.Equal(t, config.CapturePostgresLogical, cfg.Outbox.Capture.Mode)
	s, err := capturenode.ParseSettings(sample, cfg.Outbox.Capture.Enabled)
	require.NoError(t, err)
	assert.NotEmpty(t, s.PollFunction)
	assert.NotEmpty(t, s.RelayFunction)
	assert.False(t, capturenode.HasBrokerSources(cfg), "as it stands, the template runs capture only")

	// Consumers only (capture-node.md): CaptureEnabled false and a broker source added to the
	// environment make a configuration that the node runs, waking the relay function.
	assert.Equal(t, map[string]any{"Ref": "CaptureEnabled"}, env["QUEUEBOX_OUTBOX_CAPTURE_ENABLED"])
	assert.Contains(t, mapAt(mapAt(tpl, "Parameters"), "CaptureEnabled")["AllowedValues"], "false")
	sample["QUEUEBOX_OUTBOX_CAPTURE_ENABLED"] = "false"
	for k, v := range map[string]string{
		"TYPE": "rabbitmq", "QUEUENAME": "incoming-orders", "CONNECTIONURL": "amqp://rabbitmq.internal:5672", "TOPIC": "order.received",
	} {
		sample["QUEUEBOX_SOURCES_ORDERS_"+k] = v
	}
	cfg, warnings, err = service.Load(service.LoadOptions{Env: sample})
	require.NoError(t, err, "consumers only is a valid configuration")
	assert.Empty(t, warnings)
	assert.False(t, cfg.Outbox.Capture.Enabled)
	assert.True(t, capturenode.HasBrokerSources(cfg))
	s, err = capturenode.ParseSettings(sample, cfg.Outbox.Capture.Enabled)
	require.NoError(t, err)
	assert.NotEmpty(t, s.RelayFunction, "the broker sources wake the relay function")
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestCaptureTemplatePermissions: the task role has the SAM stack's policy that lets it invoke
// poll and relay, which template.yaml exports; the functions it wakes are the exported ones;
// the execution role may read the database secret.
func TestCaptureTemplatePermissions(t *testing.T) {
	t.Parallel()
	tpl := loadCaptureTemplate(t)
	sam, err := parseCFN(readRepoFile(t, "template.yaml"))
	require.NoError(t, err)
	exports := map[string]bool{}
	for _, o := range mapAt(sam, "Outputs") {
		if sub, ok := mapAt(mapAt(o.(map[string]any), "Export"), "Name")["Fn::Sub"].(string); ok {
			exports[strings.TrimPrefix(sub, "${AWS::StackName}-")] = true
		}
	}
	importOf := func(v any) string {
		imp, ok := v.(map[string]any)["Fn::ImportValue"].(map[string]any)
		require.True(t, ok, "an ImportValue: %v", v)
		sub, _ := imp["Fn::Sub"].(string)
		require.True(t, strings.HasPrefix(sub, "${QueueBoxStackName}-"), "imports from the SAM stack: %s", sub)
		name := strings.TrimPrefix(sub, "${QueueBoxStackName}-")
		assert.True(t, exports[name], "template.yaml exports %s", name)
		return name
	}

	_, td := only(t, tpl, "AWS::ECS::TaskDefinition")
	roles := mapAt(tpl, "Resources")
	taskRole := td["TaskRoleArn"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
	policies, _ := mapAt(mapAt(roles, taskRole), "Properties")["ManagedPolicyArns"].([]any)
	var imported []string
	for _, p := range policies {
		imported = append(imported, importOf(p))
	}
	assert.Contains(t, imported, "CaptureNodeInvokePolicyArn", "the task may invoke poll and relay")

	env := nameValues(t, captureContainer(t, tpl)["Environment"], "Value")
	assert.Equal(t, "PollFunctionName", importOf(env[capturenode.PollFunctionVariable]))
	assert.Equal(t, "RelayFunctionName", importOf(env[capturenode.RelayFunctionVariable]))

	execRole := td["ExecutionRoleArn"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
	var readsSecret bool
	walkStrings(mapAt(mapAt(roles, execRole), "Properties")["Policies"], func(s string) {
		if s == "secretsmanager:GetSecretValue" {
			readsSecret = true
		}
	})
	assert.True(t, readsSecret, "the execution role reads the database secret")
}

// TestCaptureTemplateReferences: every Ref, GetAtt and Sub variable names a parameter, a
// resource or a pseudo parameter, and the VPC parameters have their AWS types.
func TestCaptureTemplateReferences(t *testing.T) {
	t.Parallel()
	tpl := loadCaptureTemplate(t)
	params := mapAt(tpl, "Parameters")
	res := mapAt(tpl, "Resources")
	known := func(name string) bool {
		_, p := params[name]
		_, r := res[name]
		return p || r || strings.HasPrefix(name, "AWS::")
	}
	var check func(v any)
	subVar := regexp.MustCompile(`\$\{([^}!]+)\}`)
	check = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				switch k {
				case "Ref":
					assert.True(t, known(val.(string)), "Ref %v", val)
				case "Fn::GetAtt":
					assert.True(t, known(val.([]any)[0].(string)), "GetAtt %v", val)
				case "Fn::Sub":
					if s, ok := val.(string); ok {
						for _, m := range subVar.FindAllStringSubmatch(s, -1) {
							name, _, _ := strings.Cut(m[1], ".")
							assert.True(t, known(name), "Sub variable %s", m[1])
						}
					}
				}
				check(val)
			}
		case []any:
			for _, e := range x {
				check(e)
			}
		}
	}
	check(res)
	check(mapAt(tpl, "Outputs"))
	assert.Equal(t, "AWS::EC2::VPC::Id", mapAt(params, "VpcId")["Type"])
	assert.Equal(t, "List<AWS::EC2::Subnet::Id>", mapAt(params, "SubnetIds")["Type"])
	assert.Equal(t, "List<AWS::EC2::SecurityGroup::Id>", mapAt(params, "SecurityGroupIds")["Type"])
}
