{{/*
Name of the chart, or nameOverride.
*/}}
{{- define "fleetnet-console.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the release's objects: the release name when it already contains the
chart's name (`helm install fleetnet-console ...` gives "fleetnet-console"),
otherwise "<release>-<chart>". The ClusterRole and its binding are
cluster-scoped, so two releases must not share a name.
*/}}
{{- define "fleetnet-console.fullname" -}}
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

{{- define "fleetnet-console.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetnet-console.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "fleetnet-console.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "fleetnet-console.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetnet
{{- end }}

{{- define "fleetnet-console.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetnet-console.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false: the ServiceAccount fleetnet-console runs as" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "fleetnet-console.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Restricted pod security (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted):
the image runs as user 65532 and needs no privilege, capability or writable
root filesystem.
*/}}
{{- define "fleetnet-console.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "fleetnet-console.containerSecurityContext" -}}
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
Values that contradict each other or are missing, checked together so that
one failed install names them all.
*/}}
{{- define "fleetnet-console.validate" -}}
{{- $problems := list }}
{{- if not .Values.registry.address }}
{{- $problems = append $problems "registry.address is required: host:port of fleetnet-registry as this cluster reaches it (fleetnet-console reads the registry as an administrator)" }}
{{- end }}
{{- if and .Values.service.enabled (not .Values.tls.enabled) }}
{{- $problems = append $problems "service.enabled needs tls.enabled: without TLS fleetnet-console serves plain HTTP on the Pod's 127.0.0.1 only (reach it with kubectl port-forward), which a Service cannot reach" }}
{{- end }}
{{- if and .Values.tls.clientCertificates (not .Values.tls.enabled) }}
{{- $problems = append $problems "tls.clientCertificates needs tls.enabled: client certificates come with HTTPS" }}
{{- end }}
{{- if not (or .Values.tokens.enabled (and .Values.tls.enabled .Values.tls.clientCertificates)) }}
{{- $problems = append $problems "no authentication: set tokens.enabled, tls.clientCertificates (with tls.enabled) or both" }}
{{- end }}
{{- if and .Values.tokens.secretName (not .Values.tokens.enabled) }}
{{- $problems = append $problems (printf "tokens.secretName=%s needs tokens.enabled" .Values.tokens.secretName) }}
{{- end }}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.enabled) }}
{{- $problems = append $problems "tls.certManager.enabled needs tls.enabled" }}
{{- end }}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) }}
{{- $problems = append $problems "tls.certManager.issuerRef.name is required with tls.certManager.enabled: the cert-manager issuer of the serving certificate" }}
{{- end }}
{{- range .Values.extraArgs }}
{{- $flag := regexReplaceAll "=.*" . "" }}
{{- if has $flag (list "--listen" "--tls-cert-file" "--tls-key-file" "--client-ca-file" "--tokens-file" "--registry" "--registry-ca-file" "--registry-cert-file" "--registry-key-file" "--registry-token-file" "--hub" "--metrics-addr" "--health-addr") }}
{{- $problems = append $problems (printf "extraArgs sets %s, which the chart sets from its values" $flag) }}
{{- end }}
{{- end }}
{{- if $problems }}
{{- fail (join "; " $problems) }}
{{- end }}
{{- end }}

{{/*
The in-cluster DNS names of the web UI's Service.
*/}}
{{- define "fleetnet-console.serviceDNSNames" -}}
{{- $svc := include "fleetnet-console.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.tls.certManager.clusterDomain) | toJson }}
{{- end }}

{{/*
The web UI's address in the Pod: plain HTTP on loopback only (the binary
refuses it elsewhere), HTTPS on every address.
*/}}
{{- define "fleetnet-console.listen" -}}
{{- if .Values.tls.enabled }}:7490{{ else }}127.0.0.1:7490{{ end }}
{{- end }}

{{- define "fleetnet-console.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end }}
{{- end }}

{{/*
The Secret holding tokens.csv: the user's, or the chart's own.
*/}}
{{- define "fleetnet-console.tokensSecretName" -}}
{{- default (printf "%s-tokens" (include "fleetnet-console.fullname" .)) .Values.tokens.secretName }}
{{- end }}
