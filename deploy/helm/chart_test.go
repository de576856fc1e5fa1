package helmchart

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The handbook's deployment manifest: the management port, the grace period and the probes.
const (
	managementPort = 9090
	gracePeriod    = 75
	livePath       = "/health/live"
	readyPath      = "/health/ready"
	password       = "s3cret"
)

// renderCase is one set of values and the objects it must render besides the ConfigMap, the
// Deployment and the two Services that every rendering has.
type renderCase struct {
	name   string
	values map[string]any
	secret bool // the chart renders its Secret
	node   bool // the capture node's StatefulSet and headless Service
	sm     bool // the ServiceMonitor
	pdb    bool // the PodDisruptionBudget
}

func renderCases() []renderCase {
	pw := map[string]any{"databasePassword": password}
	nodeEnv := map[string]any{"CAPTURE_POLL_FUNCTION": "queuebox-poll", "AWS_REGION": "eu-west-1"}
	return []renderCase{
		{name: "defaults", values: map[string]any{"secret": pw}, secret: true},
		{name: "existing secret", values: map[string]any{"secret": map[string]any{
			"existingSecret": "queuebox-secrets", "keys": map[string]any{"databasePassword": "db-password"}}}},
		{name: "admin", values: map[string]any{"admin": map[string]any{"enabled": true},
			"secret": map[string]any{"databasePassword": password, "adminToken": "t0ken"}}, secret: true},
		{name: "capture node", values: map[string]any{"secret": pw,
			"captureNode": map[string]any{"enabled": true, "env": nodeEnv}}, secret: true, node: true},
		{name: "service monitor", values: map[string]any{"secret": pw,
			"serviceMonitor": map[string]any{"enabled": true}}, secret: true, sm: true},
		{name: "pod disruption budget", values: map[string]any{"secret": pw,
			"podDisruptionBudget": map[string]any{"enabled": true}}, secret: true, pdb: true},
		{name: "every option", values: map[string]any{
			"admin":               map[string]any{"enabled": true},
			"secret":              map[string]any{"databasePassword": password, "adminToken": "t0ken", "files": map[string]any{"QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_PASSWORD": "capture-password"}, "extra": map[string]any{"capture-password": "c4pture"}},
			"captureNode":         map[string]any{"enabled": true, "env": nodeEnv, "persistence": map[string]any{"storageClassName": "fast", "size": "5Gi"}},
			"serviceMonitor":      map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
			"podDisruptionBudget": map[string]any{"enabled": true, "maxUnavailable": 1},
		}, secret: true, node: true, sm: true, pdb: true},
	}
}

func TestChartRendersEveryOption(t *testing.T) {
	start := time.Now()
	facts := readImageFacts(t, dockerfilePath)
	for _, c := range renderCases() {
		t.Run(c.name, func(t *testing.T) {
			out, err := render(c.values)
			if err != nil {
				t.Fatal(err)
			}
			r := decodeAll(t, out)
			t.Logf("%d objects: %s", len(r.Kinds), strings.Join(r.Kinds, ", "))
			checkCounts(t, c, r)
			checkServer(t, facts, r)
			checkSecretFiles(t, c, r)
			if c.node {
				checkCaptureNode(t, facts, r)
			}
			if c.sm {
				checkServiceMonitor(t, r)
			}
			if c.pdb {
				checkPDB(t, r)
			}
			checkConfigLoads(t, c, r)
		})
	}
	t.Logf("rendered and checked %d value sets in %v", len(renderCases()), time.Since(start).Round(time.Millisecond))
}

func TestChartNeedsAPassword(t *testing.T) {
	_, err := render(nil)
	if err == nil || !strings.Contains(err.Error(), "set secret.databasePassword, or name an existing Secret") {
		t.Fatalf("the default values without a password rendered, or failed for another reason: %v", err)
	}
	_, err = render(map[string]any{"admin": map[string]any{"enabled": true}, "secret": map[string]any{"databasePassword": password}})
	if err == nil || !strings.Contains(err.Error(), "admin.enabled needs secret.adminToken") {
		t.Fatalf("admin without a token rendered, or failed for another reason: %v", err)
	}
}

func checkCounts(t *testing.T, c renderCase, r rendered) {
	t.Helper()
	want := map[string]int{"Deployment": 1, "ConfigMap": 1, "Service": 2, "Secret": 0, "StatefulSet": 0, "ServiceMonitor": 0, "PodDisruptionBudget": 0}
	if c.secret {
		want["Secret"] = 1
	}
	if c.node {
		want["StatefulSet"], want["Service"] = 1, 3
	}
	if c.sm {
		want["ServiceMonitor"] = 1
	}
	if c.pdb {
		want["PodDisruptionBudget"] = 1
	}
	got := map[string]int{"Deployment": len(r.Deployments), "ConfigMap": len(r.ConfigMaps), "Service": len(r.Services),
		"Secret": len(r.Secrets), "StatefulSet": len(r.StatefulSets), "ServiceMonitor": len(r.ServiceMonitors), "PodDisruptionBudget": len(r.PDBs)}
	if !maps.Equal(got, want) {
		t.Fatalf("objects: got %v, want %v", got, want)
	}
}

// checkServer holds the Deployment of queuebox serve and its Services to the image's facts.
func checkServer(t *testing.T, facts imageFacts, r rendered) {
	t.Helper()
	d := r.Deployments[0]
	checkSelector(t, "the Deployment", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas: %v, want the handbook's 2", d.Spec.Replicas)
	}
	c := checkPod(t, facts, "serve", d.Spec.Template.Spec)
	if facts.Cmd != "serve" || !slices.Equal(c.Args, []string{"serve"}) || len(c.Command) != 0 {
		t.Errorf("serve runs %v %v; the image's entrypoint is %s with CMD %s", c.Command, c.Args, facts.Entrypoint, facts.Cmd)
	}
	http := namedPort(t, c, "http")
	if !slices.Contains(facts.Ports, http) || http != facts.HealthPort {
		t.Errorf("the data port %d is not the image's EXPOSE %v and HEALTHCHECK port %d", http, facts.Ports, facts.HealthPort)
	}
	if env(c, "QUEUEBOX_SERVER_HTTPPORT") != strconv.Itoa(int(http)) {
		t.Errorf("QUEUEBOX_SERVER_HTTPPORT %q is not the data port %d", env(c, "QUEUEBOX_SERVER_HTTPPORT"), http)
	}
	if env(c, "QUEUEBOX_OUTBOX_CAPTURE_ENABLED") != "false" {
		t.Error("serve's replicas must not run capture: capture has one owner")
	}
	ports := map[string]int32{}
	for _, s := range r.Services {
		if s.Labels["app.kubernetes.io/component"] != "server" {
			continue
		}
		checkSelector(t, "the Service "+s.Name, s.Spec.Selector, d.Spec.Template.Labels)
		for _, p := range s.Spec.Ports {
			ports[p.TargetPort.StrVal] = p.Port
			namedPort(t, c, p.TargetPort.StrVal)
		}
	}
	if !maps.Equal(ports, map[string]int32{"http": http, "management": managementPort}) {
		t.Errorf("the Services publish %v", ports)
	}
}

// checkPod checks what both workloads share and returns the container: user, file system,
// grace period, probes, ports, configuration and writable volumes.
func checkPod(t *testing.T, facts imageFacts, what string, pod corev1.PodSpec) corev1.Container {
	t.Helper()
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers", what, len(pod.Containers))
	}
	c := pod.Containers[0]
	psc, csc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != facts.UID || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.FSGroup == nil || *psc.FSGroup != facts.UID {
		t.Errorf("%s: the pod does not run as the image's user %d (runAsNonRoot, fsGroup): %+v", what, facts.UID, psc)
	}
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Errorf("%s: the root file system is not read-only, or privileges may escalate: %+v", what, csc)
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds != gracePeriod {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want %d", what, pod.TerminationGracePeriodSeconds, gracePeriod)
	}
	if namedPort(t, c, "management") != managementPort || env(c, "QUEUEBOX_SERVER_MANAGEMENTPORT") != strconv.Itoa(managementPort) {
		t.Errorf("%s: the management port is not %d in the container and in QUEUEBOX_SERVER_MANAGEMENTPORT", what, managementPort)
	}
	checkProbe(t, facts, what+" liveness", c.LivenessProbe, livePath)
	checkProbe(t, facts, what+" readiness", c.ReadinessProbe, readyPath)
	checkProbe(t, facts, what+" startup", c.StartupProbe, livePath)
	if p := c.StartupProbe; p != nil && time.Duration(p.PeriodSeconds*p.FailureThreshold)*time.Second < facts.StartPeriod {
		t.Errorf("%s: the startup probe gives up before the image's start period %v", what, facts.StartPeriod)
	}
	checkMounts(t, what, pod, c)
	return c
}

// checkProbe checks an HTTP probe on the management port with a timeout at least the image's.
func checkProbe(t *testing.T, facts imageFacts, what string, p *corev1.Probe, path string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s: no HTTP probe", what)
		return
	}
	if p.HTTPGet.Path != path || !strings.HasPrefix(path, facts.HealthPath+"/") {
		t.Errorf("%s: path %s, want %s (a route under the image's %s)", what, p.HTTPGet.Path, path, facts.HealthPath)
	}
	if p.HTTPGet.Port.StrVal != "management" {
		t.Errorf("%s: port %s, want the management port", what, p.HTTPGet.Port.String())
	}
	if time.Duration(p.TimeoutSeconds)*time.Second < facts.HealthTimeout {
		t.Errorf("%s: timeout %ds, below the image's HEALTHCHECK timeout %v", what, p.TimeoutSeconds, facts.HealthTimeout)
	}
}

// checkMounts checks that every mount has a volume, that the configuration file is the
// ConfigMap's, and that every writable mount is an emptyDir or a claim.
func checkMounts(t *testing.T, what string, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	tmp := false
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			continue // a claim of the StatefulSet, checked there
		}
		if m.ReadOnly {
			continue
		}
		if v.EmptyDir == nil {
			t.Errorf("%s: %s is writable but not an emptyDir", what, m.MountPath)
		}
		tmp = tmp || m.MountPath == "/tmp"
	}
	if !tmp {
		t.Errorf("%s: no writable /tmp on the read-only root file system", what)
	}
	cfg := volumes["config"]
	if cfg.ConfigMap == nil || env(c, "QUEUEBOX_CONFIG_FILE") != mountPath(c, "config")+"/queuebox.yml" {
		t.Errorf("%s: QUEUEBOX_CONFIG_FILE %q is not queuebox.yml of the mounted ConfigMap", what, env(c, "QUEUEBOX_CONFIG_FILE"))
	}
}

// checkCaptureNode checks the capture node's StatefulSet: one replica, the node's binary, the
// state directory on the claim of its volumeClaimTemplate, and its headless Service.
func checkCaptureNode(t *testing.T, facts imageFacts, r rendered) {
	t.Helper()
	s := r.StatefulSets[0]
	checkSelector(t, "the StatefulSet", s.Spec.Selector.MatchLabels, s.Spec.Template.Labels)
	if s.Spec.Replicas == nil || *s.Spec.Replicas != 1 {
		t.Errorf("the capture node has %v replicas; capture has one owner", s.Spec.Replicas)
	}
	if s.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || s.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement {
		t.Errorf("the capture node's updates must stop the old pod first: %+v, %s", s.Spec.UpdateStrategy, s.Spec.PodManagementPolicy)
	}
	c := checkPod(t, facts, "capture node", s.Spec.Template.Spec)
	if facts.CaptureNodeBin == "" || !slices.Equal(c.Command, []string{facts.CaptureNodeBin}) || len(c.Args) != 0 {
		t.Errorf("the capture node runs %v %v, not the image's %s", c.Command, c.Args, facts.CaptureNodeBin)
	}
	if len(s.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("%d volumeClaimTemplates", len(s.Spec.VolumeClaimTemplates))
	}
	claim := s.Spec.VolumeClaimTemplates[0]
	if mountPath(c, claim.Name) != facts.CaptureDir || env(c, "QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY") != facts.CaptureDir {
		t.Errorf("the claim %s is mounted at %q and the state directory is %q, not the image's %s",
			claim.Name, mountPath(c, claim.Name), env(c, "QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY"), facts.CaptureDir)
	}
	if q, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]; !ok || q.IsZero() {
		t.Errorf("the claim requests no storage: %+v", claim.Spec.Resources)
	}
	if !slices.Contains(claim.Spec.AccessModes, corev1.ReadWriteOnce) {
		t.Errorf("the claim's access modes: %v", claim.Spec.AccessModes)
	}
	var svc *corev1.Service
	for _, x := range r.Services {
		if x.Name == s.Spec.ServiceName {
			svc = x
		}
	}
	if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("the StatefulSet's service %s is not a rendered headless Service", s.Spec.ServiceName)
	}
	checkSelector(t, "the capture node's Service", svc.Spec.Selector, s.Spec.Template.Labels)
	if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(r.Deployments[0].Spec.Template.Labels)) ||
		labels.SelectorFromSet(r.Deployments[0].Spec.Selector.MatchLabels).Matches(labels.Set(s.Spec.Template.Labels)) {
		t.Error("the selectors of serve and of the capture node overlap")
	}
}

// checkServiceMonitor checks that the ServiceMonitor scrapes /metrics on the management port
// of every Service that has one, and of no other.
func checkServiceMonitor(t *testing.T, r rendered) {
	t.Helper()
	sm := r.ServiceMonitors[0]
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "management" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("the ServiceMonitor's endpoints: %+v", sm.Spec.Endpoints)
	}
	if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{namespace}) {
		t.Errorf("the ServiceMonitor's namespaces: %v", sm.Spec.NamespaceSelector.MatchNames)
	}
	sel := labels.SelectorFromSet(sm.Spec.Selector.MatchLabels)
	for _, s := range r.Services {
		hasManagement := slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "management" })
		if sel.Matches(labels.Set(s.Labels)) != hasManagement {
			t.Errorf("the ServiceMonitor selects %s: %v; it has a management port: %v", s.Name, !hasManagement, hasManagement)
		}
	}
}

// checkPDB checks that the PodDisruptionBudget covers serve's pods and sets one bound.
func checkPDB(t *testing.T, r rendered) {
	t.Helper()
	p := r.PDBs[0]
	checkSelector(t, "the PodDisruptionBudget", p.Spec.Selector.MatchLabels, r.Deployments[0].Spec.Template.Labels)
	if (p.Spec.MinAvailable == nil) == (p.Spec.MaxUnavailable == nil) {
		t.Errorf("the PodDisruptionBudget sets minAvailable %v and maxUnavailable %v; want exactly one", p.Spec.MinAvailable, p.Spec.MaxUnavailable)
	}
}

// checkSelector fails when selector does not select a pod with podLabels.
func checkSelector(t *testing.T, what string, selector, podLabels map[string]string) {
	t.Helper()
	if len(selector) == 0 || !labels.SelectorFromSet(selector).Matches(labels.Set(podLabels)) {
		t.Errorf("%s: the selector %v does not select the pods %v", what, selector, podLabels)
	}
}

// namedPort returns the container port called name.
func namedPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Errorf("container %s has no port %q", c.Name, name)
	return 0
}

// env returns the value of the variable name in c, or "".
func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// mountPath returns where c mounts the volume name, or "".
func mountPath(c corev1.Container, name string) string {
	for _, m := range c.VolumeMounts {
		if m.Name == name {
			return m.MountPath
		}
	}
	return ""
}
