{{/*
Name of the chart, or nameOverride.
*/}}
{{- define "fleetnet-dns.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the release's objects: the release name when it already contains the
chart's name (`helm install fleetnet-dns ...` gives "fleetnet-dns"),
otherwise "<release>-<chart>". The ClusterRole and its binding are
cluster-scoped, so two releases must not share a name.
*/}}
{{- define "fleetnet-dns.fullname" -}}
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

{{- define "fleetnet-dns.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetnet-dns.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "fleetnet-dns.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "fleetnet-dns.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetnet
{{- end }}

{{- define "fleetnet-dns.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetnet-dns.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false: the ServiceAccount fleetnet-dns runs as (bound to its ClusterRole)" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "fleetnet-dns.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Restricted pod security (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted):
the image runs as user 65532 and needs no privilege, capability or writable
root filesystem.
*/}}
{{- define "fleetnet-dns.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "fleetnet-dns.containerSecurityContext" -}}
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
The forward address of the cluster's CoreDNS: the Service's clusterIP on
port 53, IPv6 in brackets; the value, or on an upgrade the address
Kubernetes allocated, or empty on a first install without the value.
*/}}
{{- define "fleetnet-dns.forwardAddress" -}}
{{- $ip := .Values.service.clusterIP }}
{{- if not $ip }}
{{- $svc := lookup "v1" "Service" .Release.Namespace (include "fleetnet-dns.fullname" .) }}
{{- $ip = dig "spec" "clusterIP" "" $svc }}
{{- end }}
{{- if contains ":" $ip }}
{{- printf "[%s]:53" $ip }}
{{- else if $ip }}
{{- printf "%s:53" $ip }}
{{- end }}
{{- end }}
