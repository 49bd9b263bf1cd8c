{{/*
Name of the chart, or nameOverride.
*/}}
{{- define "fleetnet-registry.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the release's objects: the release name when it already contains the
chart's name (`helm install fleetnet-registry ...` gives "fleetnet-registry"),
otherwise "<release>-<chart>". The ClusterRole and its binding are
cluster-scoped, so two releases must not share a name.
*/}}
{{- define "fleetnet-registry.fullname" -}}
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

{{- define "fleetnet-registry.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetnet-registry.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "fleetnet-registry.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "fleetnet-registry.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetnet
{{- end }}

{{- define "fleetnet-registry.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetnet-registry.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false: the ServiceAccount the agent runs as" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "fleetnet-registry.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Restricted pod security (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted):
the image runs as user 65532 and needs no privilege, capability or writable
root filesystem: the embedded etcd writes only to its volume, which fsGroup
makes the registry's.
*/}}
{{- define "fleetnet-registry.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "fleetnet-registry.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}


{{- define "fleetnet-registry.embedded" -}}
{{- if eq .Values.etcd.mode "embedded" }}true{{ end }}
{{- end }}

{{/*
Checks that the values describe a registry that can run, naming the values
at fault.
*/}}
{{- define "fleetnet-registry.validate" -}}
{{- $problems := list }}
{{- if and (include "fleetnet-registry.embedded" .) (gt (int .Values.replicas) 1) }}
{{- $problems = append $problems (printf "replicas=%d: the embedded etcd is a single node, so the registry runs one replica; set etcd.mode=external and etcd.external.endpoints for more" (int .Values.replicas)) }}
{{- end }}
{{- if and (eq .Values.etcd.mode "external") (not .Values.etcd.external.endpoints) }}
{{- $problems = append $problems "etcd.external.endpoints is required with etcd.mode=external: the etcd cluster's client URLs" }}
{{- end }}
{{- if gt (int64 .Values.watches.perIdentity) (int64 .Values.watches.total) }}
{{- $problems = append $problems (printf "watches.perIdentity=%d exceeds watches.total=%d" (int64 .Values.watches.perIdentity) (int64 .Values.watches.total)) }}
{{- end }}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) }}
{{- $problems = append $problems "tls.certManager.issuerRef.name is required with tls.certManager.enabled: the cert-manager issuer of the serving certificate" }}
{{- end }}
{{- if $problems }}
{{- fail (join "; " $problems) }}
{{- end }}
{{- end }}

{{/*
The in-cluster DNS names of the gRPC Service.
*/}}
{{- define "fleetnet-registry.serviceDNSNames" -}}
{{- $svc := include "fleetnet-registry.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.tls.certManager.clusterDomain) | toJson }}
{{- end }}

{{/*
The Pod template, the same for the embedded etcd's StatefulSet and the
external etcd's Deployment but for the data volume.
*/}}
{{- define "fleetnet-registry.podTemplate" -}}
{{- $embedded := include "fleetnet-registry.embedded" . -}}
metadata:
  labels:
    {{- include "fleetnet-registry.selectorLabels" . | nindent 4 }}
    app.kubernetes.io/component: registry
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "fleetnet-registry.serviceAccountName" . }}
  # The registry never calls the Kubernetes API.
  automountServiceAccountToken: false
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    {{- include "fleetnet-registry.podSecurityContext" . | nindent 4 }}
  # Long enough for watchers to be told to resume elsewhere and in-flight
  # calls to finish (the registry gives them 10s).
  terminationGracePeriodSeconds: 30
  containers:
    - name: registry
      image: {{ include "fleetnet-registry.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - --listen=:7443
        - --metrics-listen=:{{ .Values.ports.metrics }}
        - --tls-cert-file=/etc/fleetnet/tls/tls.crt
        - --tls-key-file=/etc/fleetnet/tls/tls.key
        - --client-ca-file=/etc/fleetnet/client-ca/ca.crt
        {{- if $embedded }}
        # A folder of the volume, so that etcd creates it with the
        # permissions it insists on (0700).
        - --data-dir=/var/lib/fleetnet-registry/etcd
        {{- else }}
        - --etcd-endpoints={{ join "," .Values.etcd.external.endpoints }}
        - --etcd-prefix={{ .Values.etcd.external.prefix }}
        {{- if .Values.etcd.external.tls.secretName }}
        - --etcd-ca-file=/etc/fleetnet/etcd/ca.crt
        {{- if .Values.etcd.external.tls.clientCertificate }}
        - --etcd-cert-file=/etc/fleetnet/etcd/tls.crt
        - --etcd-key-file=/etc/fleetnet/etcd/tls.key
        {{- end }}
        {{- end }}
        {{- end }}
        {{- if .Values.tokens.secretName }}
        - --token-file=/etc/fleetnet/tokens/tokens.csv
        {{- end }}
        - --lease-ttl={{ .Values.leaseTTL }}
        - --grace-period={{ .Values.gracePeriod }}
        - --max-watches-per-identity={{ .Values.watches.perIdentity | int64 }}
        - --max-watches={{ .Values.watches.total | int64 }}
        - --watcher-buffer-bytes={{ .Values.watches.bufferBytes | int64 }}
        {{- if .Values.tracing.otlpEndpoint }}
        - --otlp-endpoint={{ .Values.tracing.otlpEndpoint }}
        - --otlp-insecure={{ .Values.tracing.insecure }}
        {{- end }}
        {{- range .Values.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      ports:
        - name: grpc
          containerPort: 7443
          protocol: TCP
        - name: metrics
          containerPort: {{ .Values.ports.metrics }}
          protocol: TCP
      # A restarted registry may take a while to load its store (the
      # embedded etcd replays its log).
      startupProbe:
        httpGet:
          path: /healthz
          port: metrics
        periodSeconds: 2
        failureThreshold: 60
      livenessProbe:
        httpGet:
          path: /healthz
          port: metrics
        periodSeconds: 10
        failureThreshold: 3
      # Ready once the registry's view of the store is loaded.
      readinessProbe:
        httpGet:
          path: /readyz
          port: metrics
        periodSeconds: 5
        failureThreshold: 3
      securityContext:
        {{- include "fleetnet-registry.containerSecurityContext" . | nindent 8 }}
      {{- with .Values.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: tls
          mountPath: /etc/fleetnet/tls
          readOnly: true
        - name: client-ca
          mountPath: /etc/fleetnet/client-ca
          readOnly: true
        {{- if $embedded }}
        - name: data
          mountPath: /var/lib/fleetnet-registry
        {{- else if .Values.etcd.external.tls.secretName }}
        - name: etcd-tls
          mountPath: /etc/fleetnet/etcd
          readOnly: true
        {{- end }}
        {{- if .Values.tokens.secretName }}
        - name: tokens
          mountPath: /etc/fleetnet/tokens
          readOnly: true
        {{- end }}
  volumes:
    # Only the keys the registry reads, so that a Secret lacking one fails
    # the Pod's start with the key's name.
    - name: tls
      secret:
        secretName: {{ .Values.tls.secretName }}
        items:
          - key: tls.crt
            path: tls.crt
          - key: tls.key
            path: tls.key
    - name: client-ca
      secret:
        secretName: {{ default .Values.tls.secretName .Values.tls.clientCASecretName }}
        items:
          - key: ca.crt
            path: ca.crt
    {{- if and $embedded (not .Values.etcd.persistence.enabled) }}
    - name: data
      emptyDir: {}
    {{- end }}
    {{- if and (not $embedded) .Values.etcd.external.tls.secretName }}
    - name: etcd-tls
      secret:
        secretName: {{ .Values.etcd.external.tls.secretName }}
    {{- end }}
    {{- if .Values.tokens.secretName }}
    - name: tokens
      secret:
        secretName: {{ .Values.tokens.secretName }}
        items:
          - key: tokens.csv
            path: tokens.csv
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if .Values.affinity }}
  affinity:
    {{- toYaml .Values.affinity | nindent 4 }}
  {{- else if gt (int .Values.replicas) 1 }}
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "fleetnet-registry.selectorLabels" . | nindent 16 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
