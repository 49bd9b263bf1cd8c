{{/*
Name of the chart, or nameOverride.
*/}}
{{- define "fleetnet-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the release's objects: the release name when it already contains the
chart's name (`helm install fleetnet-gateway ...` gives "fleetnet-gateway"),
otherwise "<release>-<chart>". The ClusterRole and its binding are
cluster-scoped, so two releases must not share a name.
*/}}
{{- define "fleetnet-gateway.fullname" -}}
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

{{- define "fleetnet-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetnet-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "fleetnet-gateway.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "fleetnet-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetnet
{{- end }}

{{- define "fleetnet-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetnet-gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false: the ServiceAccount the agent runs as" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "fleetnet-gateway.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Restricted pod security (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted):
the image runs as user 65532 and needs no privilege, capability or writable
root filesystem.
*/}}
{{- define "fleetnet-gateway.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "fleetnet-gateway.containerSecurityContext" -}}
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
{{- define "fleetnet-gateway.validate" -}}
{{- $missing := list }}
{{- if not .Values.clusterID }}
{{- $missing = append $missing "clusterID (the hub cluster's id, as its fleetnet-agent's identity.clusterID)" }}
{{- end }}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) }}
{{- $missing = append $missing "tls.certManager.issuerRef.name (the cert-manager issuer of the serving certificate, with tls.certManager.enabled)" }}
{{- end }}
{{- if $missing }}
{{- fail (printf "required values are missing: %s" (join "; " $missing)) }}
{{- end }}
{{- end }}

{{/*
The in-cluster DNS names of the edge stream's Service.
*/}}
{{- define "fleetnet-gateway.serviceDNSNames" -}}
{{- $svc := include "fleetnet-gateway.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.tls.certManager.clusterDomain) | toJson }}
{{- end }}
