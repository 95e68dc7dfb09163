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
{{- include "driverset.commonLabels" . }}
{{- end }}

{{/*
The admin's commonLabels, but never one of the chart's own (the schema refuses those too, this
keeps --skip-schema-validation from rendering a key twice).
*/}}
{{- define "driverset.commonLabels" -}}
{{- $own := list "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "app.kubernetes.io/component" "helm.sh/chart" -}}
{{- range $k, $v := .Values.commonLabels }}
{{- if not (has $k $own) }}
{{ $k | quote }}: {{ $v | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Deployment's selector: the same as install.yaml's, so either can take over from the other. */}}
{{- define "driverset.selectorLabels" -}}
app.kubernetes.io/name: driverset
{{- end }}

{{/* repository@digest when a digest is given (it pins the image; the tag is not used), else repository:tag. */}}
{{- define "driverset.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* Namespaces the webhooks never touch: the configured ones and driverset's own. */}}
{{- define "driverset.excludedNamespaces" -}}
{{ append (.Values.webhook.excludedNamespaces | default list) .Release.Namespace | uniq | toJson }}
{{- end }}

{{/*
Each webhook's namespaceSelector expressions: never the excluded namespaces and, when
webhook.includedNamespaces or watchNamespaces is set, only those.
*/}}
{{- define "driverset.namespaceExpressions" -}}
- key: kubernetes.io/metadata.name
  operator: NotIn
  values: {{ include "driverset.excludedNamespaces" . }}
{{- with .Values.webhook.includedNamespaces }}
- key: kubernetes.io/metadata.name
  operator: In
  values: {{ toJson . }}
{{- end }}
{{- with .Values.watchNamespaces }}
- key: kubernetes.io/metadata.name
  operator: In
  values: {{ toJson . }}
{{- end }}
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

{{/* The PriorityClass of driverset's pods: the admin's, else driverset's own when made. */}}
{{- define "driverset.priorityClassName" -}}
{{- if .Values.priorityClassName -}}
{{ .Values.priorityClassName }}
{{- else if .Values.priorityClass.create -}}
driverset
{{- end -}}
{{- end }}

{{/*
The pod's affinity: the admin's, with the podAntiAffinity of the podAntiAffinity value unless the
admin gave one. Never two replicas on one node (required), or rather not (preferred).
*/}}
{{- define "driverset.affinity" -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "driverset.selectorLabels" . | fromYaml)) -}}
{{- if not (hasKey $affinity "podAntiAffinity") -}}
{{- if eq .Values.podAntiAffinity "required" -}}
{{- $_ := set $affinity "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) -}}
{{- else if eq .Values.podAntiAffinity "preferred" -}}
{{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) -}}
{{- end -}}
{{- end -}}
{{- toYaml $affinity -}}
{{- end }}

{{/*
How Prometheus proves it may read /metrics, and the scrape's TLS settings, for a ServiceMonitor
endpoint or a PodMonitor's podMetricsEndpoint (both take the Prometheus operator's
SafeAuthorization and SafeTLSConfig). "scrape": metrics.serviceMonitor or metrics.podMonitor;
"tokenFile": whether Prometheus's own token may be read from its file when nothing else is
given (a ServiceMonitor's bearerTokenFile; a PodMonitor has no such field).
*/}}
{{- define "driverset.scrapeAuth" -}}
{{- $s := .scrape -}}
{{- if $s.authorization -}}
authorization:
  {{- toYaml $s.authorization | nindent 2 }}
{{- else if $s.tokenSecret.create -}}
authorization:
  type: Bearer
  credentials:
    name: driverset-metrics-token
    key: token
{{- else if .tokenFile -}}
bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
{{- end }}
tlsConfig:
  {{- toYaml ($s.tlsConfig | default (dict "insecureSkipVerify" true)) | nindent 2 }}
{{- end }}
