package helmchart

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/alternayte/queuebox/shared/service"
	corev1 "k8s.io/api/core/v1"
)

// containers returns the container of serve and, when rendered, the capture node's.
func containers(r rendered) map[string]corev1.PodSpec {
	pods := map[string]corev1.PodSpec{"serve": r.Deployments[0].Spec.Template.Spec}
	for _, s := range r.StatefulSets {
		pods["capture node"] = s.Spec.Template.Spec
	}
	return pods
}

// secretVolume returns the Secret volume of pod mounted at the secret mount of c.
func secretVolume(pod corev1.PodSpec) *corev1.SecretVolumeSource {
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			return v.Secret
		}
	}
	return nil
}

// checkSecretFiles checks that every secret reaches the process as a file: reference to a key
// of the mounted Secret, the chart's (which then holds the key) or the existing one.
func checkSecretFiles(t *testing.T, c renderCase, r rendered) {
	t.Helper()
	for what, pod := range containers(r) {
		ctr := pod.Containers[0]
		vol := secretVolume(pod)
		if vol == nil {
			t.Fatalf("%s mounts no Secret", what)
		}
		if c.secret && vol.SecretName != r.Secrets[0].Name || !c.secret && vol.SecretName != "queuebox-secrets" {
			t.Errorf("%s mounts the Secret %s", what, vol.SecretName)
		}
		dir := mountPath(ctr, "secrets")
		files := 0
		for _, e := range ctr.Env {
			upper := strings.ToUpper(e.Name)
			ref, isFile := strings.CutPrefix(e.Value, "file:")
			if !isFile {
				if strings.Contains(upper, "PASSWORD") || strings.Contains(upper, "TOKEN") {
					t.Errorf("%s: %s is a plain value, not a file: reference", what, e.Name)
				}
				continue
			}
			files++
			key, ok := strings.CutPrefix(ref, dir+"/")
			if !ok || key == "" || strings.Contains(key, "/") {
				t.Errorf("%s: %s reads %s, not a key of the Secret mounted at %s", what, e.Name, ref, dir)
				continue
			}
			if c.secret {
				if _, ok := r.Secrets[0].StringData[key]; !ok {
					t.Errorf("%s: %s reads the key %s, which the chart's Secret does not hold", what, e.Name, key)
				}
			}
		}
		if files == 0 {
			t.Errorf("%s reads no secret file", what)
		}
	}
}

// checkConfigLoads loads the configuration of each workload as its process loads it, with the
// product's loader: its QUEUEBOX_ variables over the ConfigMap's queuebox.yml, the file:
// references read from the Secret. The load must succeed without a warning, so every variable
// the chart sets is a configuration key and every secret file resolves.
func checkConfigLoads(t *testing.T, c renderCase, r rendered) {
	t.Helper()
	for what, pod := range containers(r) {
		ctr := pod.Containers[0]
		env := map[string]string{}
		for _, e := range ctr.Env {
			env[e.Name] = e.Value
		}
		files := map[string]string{env["QUEUEBOX_CONFIG_FILE"]: r.ConfigMaps[0].Data["queuebox.yml"]}
		dir := mountPath(ctr, "secrets")
		for _, e := range ctr.Env {
			if ref, ok := strings.CutPrefix(e.Value, "file:"); ok {
				key := strings.TrimPrefix(ref, dir+"/")
				files[ref] = "value of " + key + "\n"
				if c.secret {
					files[ref] = r.Secrets[0].StringData[key]
				}
			}
		}
		readFile := func(name string) ([]byte, error) {
			if data, ok := files[name]; ok {
				return []byte(data), nil
			}
			return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
		}
		cfg, warnings, err := service.Load(service.LoadOptions{Env: env, ReadFile: readFile})
		if err != nil {
			t.Errorf("%s: the configuration does not load: %v", what, err)
			continue
		}
		if len(warnings) > 0 {
			t.Errorf("%s: the configuration loads with warnings: %v", what, warnings)
		}
		if cfg.Server.ManagementPort != managementPort || cfg.Server.HTTPPort != int(namedPortOrZero(ctr, "http", 8080)) {
			t.Errorf("%s: the process would listen on %d and %d", what, cfg.Server.HTTPPort, cfg.Server.ManagementPort)
		}
		if c.secret && cfg.Database.Password.Reveal() != password {
			t.Errorf("%s: the database password is not the Secret's", what)
		}
	}
}

// namedPortOrZero returns the container port called name, or def when c has none.
func namedPortOrZero(c corev1.Container, name string, def int32) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return def
}
