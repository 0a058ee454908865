{{/* The release's full name: the release name if it holds the chart's name, else both. */}}
{{- define "jetlet.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The labels that select the operator's pods (the Deployment's selector: never changed). */}}
{{- define "jetlet.selectorLabels" -}}
app.kubernetes.io/name: jetlet-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every object of the chart. */}}
{{- define "jetlet.labels" -}}
{{ include "jetlet.selectorLabels" . }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: jetlet
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The operator's ServiceAccount. */}}
{{- define "jetlet.serviceAccountName" -}}
{{- default (include "jetlet.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}
