{{/*
Name of the chart, or nameOverride.
*/}}
{{- define "fleetnet-edge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the release's objects: the release name when it already contains the
chart's name (`helm install fleetnet-edge ...` gives "fleetnet-edge"),
otherwise "<release>-<chart>". The ClusterRole and its binding are
cluster-scoped, so two releases must not share a name.
*/}}
{{- define "fleetnet-edge.fullname" -}}
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

{{- define "fleetnet-edge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetnet-edge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "fleetnet-edge.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "fleetnet-edge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetnet
{{- end }}

{{- define "fleetnet-edge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetnet-edge.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false: the ServiceAccount the agent runs as" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "fleetnet-edge.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Restricted pod security (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted):
the image runs as user 65532 and needs no privilege, capability or writable
root filesystem.
*/}}
{{- define "fleetnet-edge.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "fleetnet-edge.containerSecurityContext" -}}
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
fleetnet-gateway's edge stream: the value, or the Service of a release named
fleetnet-gateway in this namespace.
*/}}
{{- define "fleetnet-edge.gatewayAddress" -}}
{{- default (printf "fleetnet-gateway.%s.svc:7444" .Release.Namespace) .Values.gateway.address }}
{{- end }}

{{/*
The lowest listener port, when it needs the unprivileged port range opened.
*/}}
{{- define "fleetnet-edge.lowestPrivilegedPort" -}}
{{- $lowest := 65536 }}
{{- range .Values.listeners }}
{{- if lt (int .port) $lowest }}{{ $lowest = int .port }}{{ end }}
{{- end }}
{{- if lt $lowest 1024 }}{{ $lowest }}{{ end }}
{{- end }}

{{- define "fleetnet-edge.validate" -}}
{{- $problems := list }}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) }}
{{- $problems = append $problems "tls.certManager.issuerRef.name is required with tls.certManager.enabled: the cert-manager issuer of the edges' client certificates" }}
{{- end }}
{{- if and .Values.eastWest.enabled (not .Values.eastWest.secretName) }}
{{- $problems = append $problems "eastWest.secretName is required with eastWest.enabled: the Secret of the cluster's east-west certificate (tls.crt, tls.key)" }}
{{- end }}
{{- $seen := dict }}
{{- range .Values.listeners }}
{{- $key := printf "%d/%s" (int .port) (.protocol | default "TCP") }}
{{- if hasKey $seen $key }}
{{- $problems = append $problems (printf "listeners: port %s is listed twice" $key) }}
{{- end }}
{{- $_ := set $seen $key true }}
{{- end }}
{{- if $problems }}
{{- fail (join "; " $problems) }}
{{- end }}
{{- end }}
