{{/* The chart's name, cut to the 63 characters of a label. */}}
{{- define "queuebox.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's base name of every object. */}}
{{- define "queuebox.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The labels that select the pods of a component ("server" or "capture-node"). */}}
{{- define "queuebox.selectorLabels" -}}
app.kubernetes.io/name: {{ include "queuebox.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The labels of every object. */}}
{{- define "queuebox.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "queuebox.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The image reference. */}}
{{- define "queuebox.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The Secret that the pods mount: the existing one, or the chart's. */}}
{{- define "queuebox.secretName" -}}
{{- if .Values.secret.existingSecret }}
{{- .Values.secret.existingSecret }}
{{- else }}
{{- include "queuebox.fullname" . }}
{{- end }}
{{- end }}

{{/* The path of the configuration file in the pods. */}}
{{- define "queuebox.configFile" -}}
/etc/queuebox/queuebox.yml
{{- end }}

{{/* The environment of both workloads: the configuration file, the ports, the database and
the secrets as file: references. */}}
{{- define "queuebox.env" -}}
{{- $mount := .Values.secret.mountPath }}
- name: QUEUEBOX_CONFIG_FILE
  value: {{ include "queuebox.configFile" . }}
- name: QUEUEBOX_SERVER_HTTPPORT
  value: {{ .Values.ports.http | quote }}
- name: QUEUEBOX_SERVER_MANAGEMENTPORT
  value: {{ .Values.ports.management | quote }}
{{- with .Values.database.url }}
- name: QUEUEBOX_DATABASE_URL
  value: {{ . | quote }}
{{- end }}
{{- with .Values.database.username }}
- name: QUEUEBOX_DATABASE_USERNAME
  value: {{ . | quote }}
{{- end }}
- name: QUEUEBOX_DATABASE_PASSWORD
  value: {{ printf "file:%s/%s" $mount .Values.secret.keys.databasePassword | quote }}
{{- if .Values.admin.enabled }}
- name: QUEUEBOX_ADMIN_ENABLED
  value: "true"
- name: QUEUEBOX_ADMIN_AUTH_TOKEN
  value: {{ printf "file:%s/%s" $mount .Values.secret.keys.adminToken | quote }}
{{- end }}
{{- range $variable, $key := .Values.secret.files }}
- name: {{ $variable }}
  value: {{ printf "file:%s/%s" $mount $key | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The volume mounts of both workloads. */}}
{{- define "queuebox.volumeMounts" -}}
- name: config
  mountPath: /etc/queuebox
  readOnly: true
- name: secrets
  mountPath: {{ .Values.secret.mountPath }}
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end }}

{{/* The volumes of both workloads. */}}
{{- define "queuebox.volumes" -}}
- name: config
  configMap:
    name: {{ include "queuebox.fullname" . }}
- name: secrets
  secret:
    secretName: {{ include "queuebox.secretName" . }}
- name: tmp
  emptyDir: {}
{{- end }}

{{/* The probes on the management port; .probes are the values of probes. */}}
{{- define "queuebox.probes" -}}
startupProbe:
  httpGet:
    path: /health/live
    port: management
  periodSeconds: {{ .probes.startup.periodSeconds }}
  timeoutSeconds: {{ .probes.startup.timeoutSeconds }}
  failureThreshold: {{ .probes.startup.failureThreshold }}
livenessProbe:
  httpGet:
    path: /health/live
    port: management
  periodSeconds: {{ .probes.liveness.periodSeconds }}
  timeoutSeconds: {{ .probes.liveness.timeoutSeconds }}
  failureThreshold: {{ .probes.liveness.failureThreshold }}
readinessProbe:
  httpGet:
    path: /health/ready
    port: management
  periodSeconds: {{ .probes.readiness.periodSeconds }}
  timeoutSeconds: {{ .probes.readiness.timeoutSeconds }}
  failureThreshold: {{ .probes.readiness.failureThreshold }}
{{- end }}
