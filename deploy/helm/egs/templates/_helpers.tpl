{{/* Labels common to every object of the chart. */}}
{{- define "egs.labels" -}}
app.kubernetes.io/part-of: egs
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
