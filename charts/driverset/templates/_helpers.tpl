{{/*
Object names are fixed (driverset, driverset-webhook, driverset-ca, ...), as in install.yaml:
the webhook configuration is cluster-wide, so a cluster has one driverset, and the binary finds
its Service, Secret and webhook configuration by these names.
*/}}

{{- define "driverset.labels" -}}
app.kubernetes.io/name: driverset
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The Deployment's selector: the same as install.yaml's, so either can take over from the other. */}}
{{- define "driverset.selectorLabels" -}}
app.kubernetes.io/name: driverset
{{- end }}

{{- define "driverset.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Namespaces the webhooks never touch: the configured ones and driverset's own. */}}
{{- define "driverset.excludedNamespaces" -}}
{{ append (.Values.webhook.excludedNamespaces | default list) .Release.Namespace | uniq | toJson }}
{{- end }}

{{/* Fails the render on an unknown TLS mode, even with --skip-schema-validation. */}}
{{- define "driverset.selfManagedTLS" -}}
{{- if eq .Values.tls.mode "self-managed" -}}
true
{{- else if ne .Values.tls.mode "cert-manager" -}}
{{- fail (printf "tls.mode must be self-managed or cert-manager, not %q" .Values.tls.mode) -}}
{{- end -}}
{{- end }}

{{- define "driverset.serviceAccountSubject" -}}
- kind: ServiceAccount
  name: driverset
  namespace: {{ .Release.Namespace }}
{{- end }}
