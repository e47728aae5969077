{{/* The chart's names: every object is <release>-<component>, labelled like the others. */}}
{{- define "brickadmin.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "brickadmin.serviceAccount" -}}{{ include "brickadmin.fullname" . }}{{- end -}}

{{- define "brickadmin.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "brickadmin.labels" -}}
{{ include "brickadmin.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: brickadmin
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The product's image: a pinned tag (never "latest") or a digest. */}}
{{- define "brickadmin.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion | toString -}}
{{- if eq $tag "latest" -}}{{- fail "image.tag: pin a version (or set image.digest); \"latest\" is refused" -}}{{- end -}}
{{- if .Values.image.digest -}}{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}{{ .Values.image.repository }}:{{ $tag }}{{- end -}}
{{- end -}}

{{/* The ServiceAccount's user name, as the API server sees it (the admission policy matches it). */}}
{{- define "brickadmin.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "brickadmin.serviceAccount" . }}
{{- end -}}

{{/* The environment of every product container (web, worker, beat, watcher, migrations):
     inline rather than a ConfigMap, so a changed value rolls the pods, and the pre-install
     migrations Job has it before any other object of the release exists. */}}
{{- define "brickadmin.env" -}}
- name: BRICK_CLUSTER
  value: kube
- name: BRICK_IN_CLUSTER
  value: "1"
- name: DJANGO_DEBUG
  value: "0"
- name: BRICK_VAR_DIR  # an emptyDir in every pod (beat schedule, scratch); the root filesystem is read-only
  value: /var/lib/brickadmin
- name: POD_NAMESPACE  # the watcher's Lease lives in the release namespace
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
- name: DJANGO_ALLOWED_HOSTS
  value: {{ join "," .Values.allowedHosts | quote }}
- name: DJANGO_CSRF_TRUSTED_ORIGINS
  value: {{ join "," .Values.csrfTrustedOrigins | quote }}
- name: PROMETHEUS_URL
  value: {{ .Values.prometheus.url | quote }}
- name: BRICK_TRUSTED_PROXY_COUNT  # the client address sign-in lockouts count (brickadmin/lockout.py)
  value: {{ .Values.trustedProxyCount | quote }}
- name: BRICK_TRUSTED_PROXIES  # X-Forwarded-For is read only from these peers (empty: any)
  value: {{ join "," .Values.trustedProxies | quote }}
- name: BRICK_SESSION_IDLE_HOURS
  value: {{ .Values.sessionIdleHours | quote }}
- name: DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.secret.name }}, key: {{ .Values.secret.keys.databaseUrl }}}}
- name: DJANGO_SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.secret.name }}, key: {{ .Values.secret.keys.secretKey }}}}
{{- if .Values.redis.enabled }}
- name: REDIS_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ .Values.secret.name }}, key: {{ .Values.secret.keys.redisPassword }}}}
- name: REDIS_URL  # $(REDIS_PASSWORD): expanded by the kubelet (a hex or URL-safe password)
  value: redis://:$(REDIS_PASSWORD)@{{ include "brickadmin.fullname" . }}-redis:6379/0
{{- else }}
- name: REDIS_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.secret.name }}, key: {{ .Values.secret.keys.redisUrl }}}}
{{- end }}
{{- with .Values.oidc }}{{ if .issuer }}
- name: BRICK_OIDC_ISSUER
  value: {{ .issuer | quote }}
- name: BRICK_OIDC_CLIENT_ID
  value: {{ .clientId | quote }}
- name: BRICK_OIDC_CLIENT_SECRET
  valueFrom: {secretKeyRef: {name: {{ $.Values.secret.name }}, key: {{ $.Values.secret.keys.oidcClientSecret }}}}
- name: BRICK_OIDC_ADMIN_GROUP
  value: {{ .adminGroup | quote }}
- name: BRICK_OIDC_GROUPS_CLAIM
  value: {{ .groupsClaim | quote }}
- name: BRICK_OIDC_SCOPES
  value: {{ .scopes | quote }}
{{- if .providerName }}
- name: BRICK_OIDC_PROVIDER_NAME
  value: {{ .providerName | quote }}
{{- end }}
{{- if .caBundleConfigMap }}
- name: BRICK_OIDC_CA_BUNDLE
  value: /etc/brickadmin/oidc/ca.crt
{{- end }}
{{- end }}{{ end }}
{{- with .Values.smtp }}{{ if .host }}
- name: EMAIL_HOST
  value: {{ .host | quote }}
- name: EMAIL_PORT
  value: {{ .port | quote }}
- name: EMAIL_HOST_USER
  value: {{ .user | quote }}
- name: EMAIL_USE_TLS
  value: {{ ternary "1" "0" .useTls | quote }}
- name: EMAIL_USE_SSL
  value: {{ ternary "1" "0" .useSsl | quote }}
- name: DEFAULT_FROM_EMAIL
  value: {{ .from | quote }}
{{- if .user }}
- name: EMAIL_HOST_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ $.Values.secret.name }}, key: {{ $.Values.secret.keys.smtpPassword }}}}
{{- end }}
{{- end }}{{ end }}
{{- if .Values.publicUrl }}
- name: BRICK_PUBLIC_URL
  value: {{ .Values.publicUrl | quote }}
{{- end }}
{{- with .Values.webhookAllowedHosts }}
- name: BRICK_WEBHOOK_ALLOWED_HOSTS
  value: {{ join "," . | quote }}
{{- end }}
- name: BRICK_WORKSPACE_POD_SECURITY
  value: {{ .Values.workspacePodSecurity | default "" | quote }}
{{- range $k, $v := .Values.extraEnv }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end -}}

{{/* A product container's securityContext: nothing to escalate, nothing to write but its emptyDirs. */}}
{{- define "brickadmin.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
{{- end -}}

{{/* The writable places of a product pod: BRICK_VAR_DIR and /tmp (emptyDirs). */}}
{{- define "brickadmin.mounts" -}}
volumeMounts:
  - {name: var, mountPath: /var/lib/brickadmin}
  - {name: tmp, mountPath: /tmp}
{{- if .Values.oidc.caBundleConfigMap }}
  - {name: oidc-ca, mountPath: /etc/brickadmin/oidc, readOnly: true}
{{- end }}
{{- end -}}

{{- define "brickadmin.volumes" -}}
volumes:
  - {name: var, emptyDir: {}}
  - {name: tmp, emptyDir: {}}
{{- if .Values.oidc.caBundleConfigMap }}
  - name: oidc-ca
    configMap: {name: {{ .Values.oidc.caBundleConfigMap }}}
{{- end }}
{{- end -}}

{{/* What every product pod shares: the ServiceAccount (or none), the security context, pull secrets. */}}
{{- define "brickadmin.podSpec" -}}
securityContext: {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
