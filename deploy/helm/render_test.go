package helmchart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir       = "queuebox"
	dockerfilePath = "../../local/Dockerfile"
	releaseName    = "qb"
	namespace      = "queuebox"
)

// rendered holds the objects of one rendering, each decoded into its type.
type rendered struct {
	Deployments     []*appsv1.Deployment
	StatefulSets    []*appsv1.StatefulSet
	Services        []*corev1.Service
	ConfigMaps      []*corev1.ConfigMap
	Secrets         []*corev1.Secret
	PDBs            []*policyv1.PodDisruptionBudget
	ServiceMonitors []*monitoringv1.ServiceMonitor
	Kinds           []string // "Kind/name" of every object, sorted
}

// render renders the chart as `helm template` does, with values over values.yaml, and
// returns the manifests by template name.
func render(values map[string]any) (map[string]string, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load the chart: %w", err)
	}
	opts := common.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := util.ToRenderValues(chrt, values, opts, nil)
	if err != nil {
		return nil, fmt.Errorf("compose the values: %w", err)
	}
	out, err := engine.Engine{Strict: true}.Render(chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("render the chart: %w", err)
	}
	return out, nil
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// decodeAll splits every manifest into its documents and decodes each one strictly: a field
// that its type does not have is an error, and so is a kind the chart is not meant to render.
func decodeAll(t *testing.T, manifests map[string]string) rendered {
	t.Helper()
	var r rendered
	names := make([]string, 0, len(manifests))
	for name := range manifests {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if path.Ext(name) != ".yaml" && path.Ext(name) != ".yml" {
			continue // _helpers.tpl
		}
		for i, doc := range docSeparator.Split(manifests[name], -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			if err := r.decode([]byte(doc)); err != nil {
				t.Fatalf("%s, document %d: %v\n%s", name, i, err, doc)
			}
		}
	}
	sort.Strings(r.Kinds)
	return r
}

// decode decodes one document by its apiVersion and kind.
func (r *rendered) decode(doc []byte) error {
	data, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return fmt.Errorf("parse YAML: %w", err)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("read apiVersion and kind: %w", err)
	}
	var target any
	switch head.APIVersion + " " + head.Kind {
	case "apps/v1 Deployment":
		target = appendNew(&r.Deployments)
	case "apps/v1 StatefulSet":
		target = appendNew(&r.StatefulSets)
	case "v1 Service":
		target = appendNew(&r.Services)
	case "v1 ConfigMap":
		target = appendNew(&r.ConfigMaps)
	case "v1 Secret":
		target = appendNew(&r.Secrets)
	case "policy/v1 PodDisruptionBudget":
		target = appendNew(&r.PDBs)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		target = appendNew(&r.ServiceMonitors)
	default:
		return fmt.Errorf("unexpected object %s %s", head.APIVersion, head.Kind)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(target); err != nil {
		return fmt.Errorf("decode %s strictly: %w", head.Kind, err)
	}
	r.Kinds = append(r.Kinds, head.Kind+"/"+head.Metadata.Name)
	return nil
}

// appendNew appends a new zero object to list and returns it.
func appendNew[T any](list *[]*T) *T {
	v := new(T)
	*list = append(*list, v)
	return v
}
