{{/*
Name of the chart, or nameOverride.
*/}}
{{- define "fleetnet-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the release's objects: the release name when it already contains the
chart's name (`helm install fleetnet-agent ...` gives "fleetnet-agent"),
otherwise "<release>-<chart>". The ClusterRole and its binding are
cluster-scoped, so two releases must not share a name.
*/}}
{{- define "fleetnet-agent.fullname" -}}
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

{{- define "fleetnet-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetnet-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "fleetnet-agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "fleetnet-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetnet
{{- end }}

{{- define "fleetnet-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetnet-agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false: the ServiceAccount the agent runs as" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "fleetnet-agent.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Restricted pod security (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted):
the image runs as user 65532 and needs no privilege, capability or writable
root filesystem.
*/}}
{{- define "fleetnet-agent.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "fleetnet-agent.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The values without a usable default, checked together so that one failed
install names all that are missing.
*/}}
{{- define "fleetnet-agent.validate" -}}
{{- $missing := list }}
{{- if or (eq .Values.identity.source "flags") .Values.identity.createClusterProperties }}
{{- if not .Values.identity.clusterID }}
{{- $missing = append $missing "identity.clusterID (this cluster's id, unique in the clusterset)" }}
{{- end }}
{{- if not .Values.identity.clustersetID }}
{{- $missing = append $missing "identity.clustersetID (the clusterset's id)" }}
{{- end }}
{{- end }}
{{- if not .Values.registry.address }}
{{- $missing = append $missing "registry.address (host:port of fleetnet-registry as this cluster reaches it)" }}
{{- end }}
{{- if and .Values.eastWest.gatewayService (not .Values.eastWest.secretName) }}
{{- $missing = append $missing "eastWest.secretName (the Secret of the east-west model stream's serving certificate, with eastWest.gatewayService)" }}
{{- end }}
{{- if $missing }}
{{- fail (printf "required values are missing: %s" (join "; " $missing)) }}
{{- end }}
{{- end }}
