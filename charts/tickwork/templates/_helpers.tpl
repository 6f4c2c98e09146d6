{{/* Chart name, truncated to the 63 characters a DNS label allows. */}}
{{- define "tickwork.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart unless the release name already contains the chart name. */}}
{{- define "tickwork.fullname" -}}
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

{{- define "tickwork.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object; call with (dict "ctx" $ "component" "operator"). */}}
{{- define "tickwork.labels" -}}
helm.sh/chart: {{ include "tickwork.chart" .ctx }}
{{ include "tickwork.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: tickwork
{{- end }}

{{- define "tickwork.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tickwork.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
An image reference; call with (dict "ctx" $ "image" <values> "registry" <registry>).
The digest wins over the tag (default: appVersion) and global.imageRegistry over the
registry. A repository whose first part is a registry host (it has a "." or ":", or is
"localhost", as docker reads a reference) is used as it is: values written when
`repository` held the registry keep naming the same image.
*/}}
{{- define "tickwork.imageRef" -}}
{{- $repository := .image.repository }}
{{- $parts := splitList "/" $repository }}
{{- $first := first $parts }}
{{- $hasHost := and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) }}
{{- $registry := .registry }}
{{- with (.ctx.Values.global | default dict).imageRegistry }}{{ $registry = . }}{{ end }}
{{- if and $registry (not $hasHost) }}{{ $repository = printf "%s/%s" (trimSuffix "/" $registry) $repository }}{{ end }}
{{- if .image.digest }}
{{- printf "%s@%s" $repository .image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .ctx.Chart.AppVersion .image.tag) }}
{{- end }}
{{- end }}

{{- define "tickwork.image" -}}
{{- include "tickwork.imageRef" (dict "ctx" . "image" .Values.image "registry" .Values.image.registry) }}
{{- end }}

{{/* The workers' image: worker.image if it names a repository (its registry defaults to
image.registry), else Tickwork's image. */}}
{{- define "tickwork.workerImage" -}}
{{- with .Values.worker.image }}
{{- if .repository }}
{{- include "tickwork.imageRef" (dict "ctx" $ "image" . "registry" (default $.Values.image.registry .registry)) }}
{{- else }}
{{- include "tickwork.image" $ }}
{{- end }}
{{- end }}
{{- end }}

{{- define "tickwork.operatorName" -}}
{{- printf "%s-operator" (include "tickwork.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tickwork.workerName" -}}
{{- printf "%s-worker" (include "tickwork.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tickwork.redisName" -}}
{{- printf "%s-redis" (include "tickwork.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Secret holding the Redis password, and its key. */}}
{{- define "tickwork.redisSecretName" -}}
{{- if .Values.redis.enabled }}
{{- if .Values.redis.auth.existingSecret }}
{{- .Values.redis.auth.existingSecret }}
{{- else if .Values.redis.auth.generate }}
{{- include "tickwork.redisName" . }}
{{- else }}
{{- fail "redis.auth.generate=false needs redis.auth.existingSecret: a Secret with the Redis password (GitOps: helm template and Argo CD cannot keep a generated one)" }}
{{- end }}
{{- else }}
{{- required "externalRedis.existingSecret is required when redis.enabled is false" .Values.externalRedis.existingSecret }}
{{- end }}
{{- end }}

{{/* The Redis server image. */}}
{{- define "tickwork.redisImage" -}}
{{- include "tickwork.imageRef" (dict "ctx" . "image" .Values.redis.image "registry" .Values.redis.image.registry) }}
{{- end }}

{{/*
A Kubernetes memory quantity ("512Mi", "1.5Gi", "500M", "1073741824") in bytes, or
a Redis size ("256mb", "1gb", "100000"); call with (list <text> "k8s"|"redis").
*/}}
{{- define "tickwork.bytes" -}}
{{- $raw := index . 0 }}
{{- $text := ternary (printf "%.0f" $raw) (toString $raw) (kindIs "float64" $raw) }}
{{- $units := dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 }}
{{- if eq (index . 1) "redis" }}
{{- $text = lower $text }}
{{- $units = dict "" 1 "b" 1 "k" 1000 "kb" 1024 "m" 1000000 "mb" 1048576 "g" 1000000000 "gb" 1073741824 }}
{{- end }}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $text }}
{{- $unit := trimPrefix $number $text }}
{{- if or (not $number) (not (hasKey $units $unit)) }}
{{- fail (printf "cannot read %q as a memory size" $text) }}
{{- end }}
{{- mulf (float64 $number) (index $units $unit) | floor | int64 }}
{{- end }}

{{/*
Redis' maxmemory in bytes: redis.maxMemory, else half the memory limit. More than half
is refused: the AOF rewrite forks, and the copy-on-write of a busy Redis can double it.
*/}}
{{- define "tickwork.redisMaxMemory" -}}
{{- $limit := (.Values.redis.resources.limits | default dict).memory }}
{{- if .Values.redis.maxMemory }}
{{- $max := include "tickwork.bytes" (list .Values.redis.maxMemory "redis") | int64 }}
{{- if and $limit (gt $max (div (include "tickwork.bytes" (list $limit "k8s") | int64) 2)) }}
{{- fail (printf "redis.maxMemory %s is more than half of redis.resources.limits.memory %s: the AOF rewrite's copy-on-write needs the rest" .Values.redis.maxMemory (toString $limit)) }}
{{- end }}
{{- $max }}
{{- else if $limit }}
{{- div (include "tickwork.bytes" (list $limit "k8s") | int64) 2 }}
{{- else }}
{{- fail "redis.resources.limits.memory is required (maxmemory is half of it), or set redis.maxMemory" }}
{{- end }}
{{- end }}

{{/*
The generated Redis password, base64: the existing Secret's on upgrades, else a new
one. Computed once per render and kept in a scratch key, so that the Secret and the
pods' checksum annotations see the same value (a second randAlphaNum would differ
and restart every pod on the first upgrade).
*/}}
{{- define "tickwork.redisPassword" -}}
{{- $scratch := .Values.redis.auth }}
{{- if not (hasKey $scratch "__password") }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "tickwork.redisName" .) }}
{{- if and $existing (index ($existing.data | default dict) .Values.redis.auth.passwordKey) }}
{{- $_ := set $scratch "__password" (index $existing.data .Values.redis.auth.passwordKey) }}
{{- else }}
{{- $_ := set $scratch "__password" (randAlphaNum 32 | b64enc) }}
{{- end }}
{{- end }}
{{- index $scratch "__password" }}
{{- end }}

{{/*
Rolls the pods when the Redis password changes: a digest, never the password. A
generated password is known here; an existing Secret's content is read with `lookup`
where Helm can (install, upgrade), so rotating it and upgrading restarts Redis and its
clients together; `helm template` sees only the Secret's name.
*/}}
{{- define "tickwork.redisChecksum" -}}
{{- if and .Values.redis.enabled (not .Values.redis.auth.existingSecret) }}
{{- include "tickwork.redisPassword" . | sha256sum }}
{{- else }}
{{- $name := include "tickwork.redisSecretName" . }}
{{- $key := include "tickwork.redisPasswordKey" . }}
{{- $secret := lookup "v1" "Secret" .Release.Namespace $name }}
{{- $data := index (($secret | default dict).data | default dict) $key | default "" }}
{{- printf "%s/%s/%s" $name $key ($data | sha256sum) | sha256sum }}
{{- end }}
{{- end }}

{{- define "tickwork.redisPasswordKey" -}}
{{- if .Values.redis.enabled }}{{ .Values.redis.auth.passwordKey }}{{ else }}{{ .Values.externalRedis.passwordKey }}{{ end }}
{{- end }}

{{- define "tickwork.redisUrl" -}}
{{- if .Values.redis.enabled }}
{{- printf "redis://%s.%s.svc:6379/0" (include "tickwork.redisName" .) .Release.Namespace }}
{{- else if .Values.externalRedis.sentinel.masterSet }}
{{- default "redis://sentinel/0" .Values.externalRedis.url }}
{{- else }}
{{- required "externalRedis.url is required when redis.enabled is false" .Values.externalRedis.url }}
{{- end }}
{{- end }}

{{/* "true" if Tickwork talks TLS to an external Redis. */}}
{{- define "tickwork.redisTls" -}}
{{- if and (not .Values.redis.enabled) (or .Values.externalRedis.tls.enabled (hasPrefix "rediss://" .Values.externalRedis.url)) }}true{{ end }}
{{- end }}

{{/* The external Sentinels, checked: host:port each. */}}
{{- define "tickwork.redisSentinels" -}}
{{- $hosts := .Values.externalRedis.sentinel.hosts }}
{{- if not $hosts }}
{{- fail "externalRedis.sentinel.hosts is required with externalRedis.sentinel.masterSet" }}
{{- end }}
{{- join "," $hosts }}
{{- end }}

{{/* Environment shared by the operator and the worker. */}}
{{- define "tickwork.commonEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: TICKWORK_REDIS_URL
  value: {{ include "tickwork.redisUrl" . | quote }}
- name: TICKWORK_REDIS_PASSWORD_FILE
  value: /var/run/secrets/tickwork/redis/password
{{- if not .Values.redis.enabled }}
{{- with .Values.externalRedis.username }}
- name: TICKWORK_REDIS_USERNAME
  value: {{ . | quote }}
{{- end }}
{{- if include "tickwork.redisTls" . }}
- name: TICKWORK_REDIS_TLS
  value: "true"
{{- if .Values.externalRedis.tls.caSecret }}
- name: TICKWORK_REDIS_TLS_CA_FILE
  value: /var/run/secrets/tickwork/redis-ca/ca.crt
{{- end }}
{{- if .Values.externalRedis.tls.insecureSkipVerify }}
- name: TICKWORK_REDIS_TLS_VERIFY
  value: "false"
{{- end }}
{{- end }}
{{- with .Values.externalRedis.sentinel }}
{{- if .masterSet }}
- name: TICKWORK_REDIS_SENTINELS
  value: {{ include "tickwork.redisSentinels" $ | quote }}
- name: TICKWORK_REDIS_SENTINEL_MASTER
  value: {{ .masterSet | quote }}
{{- if .existingSecret }}
- name: TICKWORK_REDIS_SENTINEL_PASSWORD_FILE
  value: /var/run/secrets/tickwork/redis-sentinel/password
{{- end }}
{{- end }}
{{- end }}
{{- end }}
- name: TICKWORK_REDIS_QUEUE
  value: {{ .Values.queueName | quote }}
- name: TICKWORK_REDIS_REAP_GRACE_SECONDS
  value: {{ .Values.worker.leaseSeconds | quote }}
{{- with .Values.traces.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
{{- end }}

{{/* The Redis password as a file (not an environment variable, which anything running
as the same user could read from /proc): the volume, and where it is mounted. */}}
{{- define "tickwork.redisPasswordVolume" -}}
- name: redis-password
  secret:
    secretName: {{ include "tickwork.redisSecretName" . }}
    defaultMode: 0440
    items:
      - key: {{ include "tickwork.redisPasswordKey" . }}
        path: password
{{- if not .Values.redis.enabled }}
{{- if and (include "tickwork.redisTls" .) .Values.externalRedis.tls.caSecret }}
- name: redis-ca
  secret:
    secretName: {{ .Values.externalRedis.tls.caSecret }}
    defaultMode: 0444
    items:
      - key: {{ .Values.externalRedis.tls.caKey }}
        path: ca.crt
{{- end }}
{{- if and .Values.externalRedis.sentinel.masterSet .Values.externalRedis.sentinel.existingSecret }}
- name: redis-sentinel-password
  secret:
    secretName: {{ .Values.externalRedis.sentinel.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ .Values.externalRedis.sentinel.passwordKey }}
        path: password
{{- end }}
{{- end }}
{{- end }}
{{- define "tickwork.redisPasswordMount" -}}
- name: redis-password
  mountPath: /var/run/secrets/tickwork/redis
  readOnly: true
{{- if not .Values.redis.enabled }}
{{- if and (include "tickwork.redisTls" .) .Values.externalRedis.tls.caSecret }}
- name: redis-ca
  mountPath: /var/run/secrets/tickwork/redis-ca
  readOnly: true
{{- end }}
{{- if and .Values.externalRedis.sentinel.masterSet .Values.externalRedis.sentinel.existingSecret }}
- name: redis-sentinel-password
  mountPath: /var/run/secrets/tickwork/redis-sentinel
  readOnly: true
{{- end }}
{{- end }}
{{- end }}

{{/* Every namespace RBAC is granted in: the watched ones, or none (cluster-wide). */}}
{{- define "tickwork.clusterWide" -}}
{{- if not .Values.watchNamespaces }}true{{ end }}
{{- end }}

{{/* "true" if any job may run a command: everywhere, or in one tenant's namespace. */}}
{{- define "tickwork.commandTasksOn" -}}
{{- $on := .Values.worker.commandTasks.enabled -}}
{{- range $_, $tenant := .Values.worker.tenants }}{{ if $tenant.commandTasks }}{{ $on = true }}{{ end }}{{ end -}}
{{- if $on }}true{{ end -}}
{{- end }}

{{/*
The ServiceAccount a component runs as; call with (dict "ctx" $ "component" "operator").
Its own name by default; with create=false the installer's, which must be given:
binding Tickwork's roles to the namespace's `default` account would hand them to
every other pod there.
*/}}
{{- define "tickwork.serviceAccountName" -}}
{{- $sa := (index .ctx.Values .component).serviceAccount }}
{{- if $sa.create }}
{{- default (printf "%s-%s" (include "tickwork.fullname" .ctx) .component | trunc 63 | trimSuffix "-") $sa.name }}
{{- else }}
{{- required (printf "%s.serviceAccount.name is required when %s.serviceAccount.create is false" .component .component) $sa.name }}
{{- end }}
{{- end }}

{{/* The ServiceAccount of a component, unless the installer brings their own. */}}
{{- define "tickwork.serviceAccount" -}}
{{- $sa := (index .ctx.Values .component).serviceAccount }}
{{- if $sa.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "tickwork.serviceAccountName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "tickwork.labels" . | nindent 4 }}
  {{- with merge (deepCopy ($sa.annotations | default dict)) (.ctx.Values.serviceAccount.annotations | default dict) }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: true
{{- end }}
{{- end }}

{{/* Labels of a component's pods: the chart's, then podLabels that do not clash. */}}
{{- define "tickwork.podLabels" -}}
{{- $labels := include "tickwork.labels" . }}
{{- $labels }}
{{- $own := $labels | fromYaml }}
{{- range $key, $value := (index .ctx.Values .component).podLabels }}
{{- if not (hasKey $own $key) }}
{{ $key }}: {{ $value | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* imagePullSecrets of every pod: global.imagePullSecrets, then imagePullSecrets. */}}
{{- define "tickwork.imagePullSecrets" -}}
{{- $secrets := concat ((.Values.global | default dict).imagePullSecrets | default list) (.Values.imagePullSecrets | default list) | uniq }}
{{- with $secrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The scheduling fields shared by the operator's and the worker's pods (affinity aside):
priority class (the component's, else global.priorityClassName), node selector,
tolerations, topology spread constraints (a constraint without a labelSelector selects
the component's pods). Call with (dict "ctx" $ "component" "worker").
*/}}
{{- define "tickwork.podScheduling" -}}
{{- $values := index .ctx.Values .component }}
{{- with $values.priorityClassName | default (.ctx.Values.global | default dict).priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- range . }}
  {{- $constraint := deepCopy . }}
  {{- if not (hasKey $constraint "labelSelector") }}
  {{- $_ := set $constraint "labelSelector" (dict "matchLabels" (include "tickwork.selectorLabels" $ | fromYaml)) }}
  {{- end }}
  - {{- toYaml $constraint | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/* An HTTP probe: the chart's check, the values' timing. */}}
{{- define "tickwork.httpProbe" -}}
httpGet:
  path: {{ .path }}
  port: http
{{- toYaml .timing | nindent 0 }}
{{- end }}

{{/* The operator keeps the workers' NetworkPolicy for the API server (see values). */}}
{{- define "tickwork.keepsApiServerPolicy" -}}
{{- if and .Values.networkPolicy.enabled .Values.networkPolicy.workerEgress.enabled .Values.networkPolicy.workerEgress.keepApiServerAddresses (not .Values.networkPolicy.workerEgress.apiServerCIDRs) }}true{{ end -}}
{{- end }}

{{- define "tickwork.workerEgressPolicyName" -}}
{{- printf "%s-worker-egress" (include "tickwork.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{- define "tickwork.apiServerPolicyName" -}}
{{- printf "%s-worker-apiserver" (include "tickwork.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end }}
