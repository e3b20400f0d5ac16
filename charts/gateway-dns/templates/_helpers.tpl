{{/*
Names. Every object is named after the release, so that with the release name "gateway-dns"
(the documented one) they carry the names manifests/base uses.
*/}}
{{- define "gateway-dns.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* gateway-dns's image: the Deployment's and the certificate Jobs'. */}}
{{- define "gateway-dns.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "gateway-dns.tlsSecretName" -}}
{{- .Values.certificates.secretName | default (printf "%s-tls" (include "gateway-dns.fullname" .)) -}}
{{- end -}}

{{/* The Lease the sync loop takes: the binary's default name, gateway-dns, for the default release. */}}
{{- define "gateway-dns.leaseName" -}}
{{- include "gateway-dns.fullname" . -}}
{{- end -}}

{{- define "gateway-dns.leaderElection" -}}
{{- if and .Values.leaderElection.enabled (ne .Values.dns.provider "embedded") -}}true{{- end -}}
{{- end -}}

{{/* Labels on every object: those of manifests/base plus the ones Helm charts carry. */}}
{{- define "gateway-dns.labels" -}}
app.kubernetes.io/name: gateway-dns
app.kubernetes.io/part-of: gateway-dns
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The pods' identity. The instance label keeps two releases in one namespace apart. */}}
{{- define "gateway-dns.selectorLabels" -}}
app.kubernetes.io/name: gateway-dns
app.kubernetes.io/component: webhook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The Service names kube-apiserver may call the webhook by (and the certificate names). */}}
{{- define "gateway-dns.serviceHosts" -}}
{{- $service := include "gateway-dns.fullname" . -}}
{{- $namespace := .Release.Namespace -}}
{{- list $service (printf "%s.%s" $service $namespace) (printf "%s.%s.svc" $service $namespace) (printf "%s.%s.svc.cluster.local" $service $namespace) | toJson -}}
{{- end -}}
