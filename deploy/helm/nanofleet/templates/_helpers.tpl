{{/*
The components of the fleet: values key -> service (binary and image) name.
*/}}
{{- define "nanofleet.components" -}}
gateway: channel-gateway
agentWorker: agent-worker
toolRunner: tool-runner
memoryConsolidator: memory-consolidator
{{- end }}

{{- define "nanofleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name, truncated so that "<fullname>-memory-consolidator"
stays within 63 characters.
*/}}
{{- define "nanofleet.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 42 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 42 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 42 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "nanofleet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. Call with (dict "root" $ "component" "agent-worker"). */}}
{{- define "nanofleet.labels" -}}
helm.sh/chart: {{ include "nanofleet.chart" .root }}
{{ include "nanofleet.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Values.image.tag | default .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: nanofleet
{{- end }}

{{/* Selector labels. Call with (dict "root" $ "component" "agent-worker"). */}}
{{- define "nanofleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nanofleet.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{- define "nanofleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "nanofleet.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "nanofleet.secretName" -}}
{{- default (printf "%s-secrets" (include "nanofleet.fullname" .)) .Values.secrets.existingSecret }}
{{- end }}

{{/* Image of a component. Call with (dict "root" $ "c" $component "name" "agent-worker"). */}}
{{- define "nanofleet.image" -}}
{{- $repo := .c.image.repository | default (printf "%s/%s" .root.Values.image.repository .name) }}
{{- $tag := .c.image.tag | default .root.Values.image.tag | default .root.Chart.AppVersion }}
{{- printf "%s:%s" $repo $tag }}
{{- end }}

{{/* JetStream names, as pkg/subject builds them from the prefix. */}}
{{- define "nanofleet.inboundStream" -}}
{{- printf "%s_IN" (.Values.nats.prefix | replace "-" "_" | upper) }}
{{- end }}

{{/* "true" when something else (KEDA or an HPA) owns the agent workers' replica count. */}}
{{- define "nanofleet.workersAutoscaled" -}}
{{- if .Values.agentWorker.autoscaling.enabled }}true{{ end }}
{{- end }}

{{/*
Container security context of a component: the chart-wide one, relaxed for
the tool-runner's sandbox (toolRunner.sandbox) and only there. Call with
(dict "root" $ "key" "toolRunner").
*/}}
{{- define "nanofleet.containerSecurityContext" -}}
{{- $ctx := deepCopy .root.Values.containerSecurityContext }}
{{- if eq .key "toolRunner" }}
{{- $sandbox := .root.Values.toolRunner.sandbox }}
{{- $_ := set $ctx "seccompProfile" (deepCopy $sandbox.seccompProfile) }}
{{- if $sandbox.appArmorProfile }}
{{- $_ := set $ctx "appArmorProfile" (deepCopy $sandbox.appArmorProfile) }}
{{- end }}
{{- if $sandbox.procMountUnmasked }}
{{- $_ := set $ctx "procMount" "Unmasked" }}
{{- end }}
{{- end }}
{{- toYaml $ctx }}
{{- end }}
