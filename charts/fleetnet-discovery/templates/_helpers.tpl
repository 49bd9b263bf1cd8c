{{/*
Name of the chart, or nameOverride.
*/}}
{{- define "fleetnet-discovery.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the release's objects: the release name when it already contains the
chart's name (`helm install fleetnet-discovery ...` gives "fleetnet-discovery"),
otherwise "<release>-<chart>". The ClusterRole and its binding are
cluster-scoped, so two releases must not share a name.
*/}}
{{- define "fleetnet-discovery.fullname" -}}
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

{{- define "fleetnet-discovery.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetnet-discovery.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "fleetnet-discovery.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "fleetnet-discovery.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetnet
{{- end }}

{{- define "fleetnet-discovery.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetnet-discovery.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false: the ServiceAccount fleetnet-discovery runs as" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "fleetnet-discovery.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Restricted pod security (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted):
the image runs as user 65532 and needs no privilege, capability or writable
root filesystem.
*/}}
{{- define "fleetnet-discovery.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "fleetnet-discovery.containerSecurityContext" -}}
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
Values that contradict each other, checked together so that one failed
install names them all.
*/}}
{{- define "fleetnet-discovery.validate" -}}
{{- $problems := list }}
{{- if and (eq .Values.poolSource "memory") (gt (int .Values.replicas) 1) }}
{{- $problems = append $problems (printf "replicas=%d with poolSource=memory: registrations live in one process, so replicas must be 1" (int .Values.replicas)) }}
{{- end }}
{{- if and (eq .Values.poolSource "kubernetes") .Values.routers }}
{{- $problems = append $problems "routers is for poolSource=memory or registry; kubernetes finds the router replicas itself (kubernetes.routersService)" }}
{{- end }}
{{- if and (eq .Values.poolSource "registry") (not .Values.registry.address) }}
{{- $problems = append $problems "registry.address is required with poolSource=registry: host:port of fleetnet-registry as this cluster reaches it" }}
{{- end }}
{{- if and .Values.tls.clientCertificates (not .Values.tls.enabled) }}
{{- $problems = append $problems "tls.clientCertificates needs tls.enabled: client certificates come with HTTPS" }}
{{- end }}
{{- if not (or .Values.tokens.secretName (and .Values.tls.enabled .Values.tls.clientCertificates)) }}
{{- $problems = append $problems "no authentication: set tokens.secretName, tls.clientCertificates (with tls.enabled) or both" }}
{{- end }}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.enabled) }}
{{- $problems = append $problems "tls.certManager.enabled needs tls.enabled" }}
{{- end }}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) }}
{{- $problems = append $problems "tls.certManager.issuerRef.name is required with tls.certManager.enabled: the cert-manager issuer of the serving certificate" }}
{{- end }}
{{- if $problems }}
{{- fail (join "; " $problems) }}
{{- end }}
{{- end }}

{{/*
The in-cluster DNS names of the API's Service.
*/}}
{{- define "fleetnet-discovery.serviceDNSNames" -}}
{{- $svc := include "fleetnet-discovery.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.tls.certManager.clusterDomain) | toJson }}
{{- end }}

{{/*
The API's scheme.
*/}}
{{- define "fleetnet-discovery.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end }}
{{- end }}
