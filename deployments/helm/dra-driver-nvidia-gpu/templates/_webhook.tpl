{{/* Names and labels of the validating admission webhook's objects (webhook-*.yaml). */}}

{{/* The webhook's Deployment, Service and ValidatingWebhookConfiguration name. */}}
{{- define "dra-driver-nvidia-gpu.webhookName" -}}
{{- printf "%s-webhook" (include "dra-driver-nvidia-gpu.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.webhookSelectorLabels" -}}
{{ include "dra-driver-nvidia-gpu.selectorLabels" . }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "dra-driver-nvidia-gpu.webhookServiceAccountName" -}}
{{- if .Values.webhook.serviceAccount.create }}
{{- default (include "dra-driver-nvidia-gpu.webhookName" .) .Values.webhook.serviceAccount.name }}
{{- else }}
{{- required "webhook.serviceAccount.name is required when webhook.serviceAccount.create=false" .Values.webhook.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the serving certificate: cert-manager's, the user's, or the chart's. */}}
{{- define "dra-driver-nvidia-gpu.webhookCertSecretName" -}}
{{- if and (eq .Values.webhook.tls.mode "secret") .Values.webhook.tls.secret.name }}
{{- .Values.webhook.tls.secret.name }}
{{- else }}
{{- printf "%s-cert" (include "dra-driver-nvidia-gpu.webhookName" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* DNS names the serving certificate must carry: the API server dials <service>.<namespace>.svc. */}}
{{- define "dra-driver-nvidia-gpu.webhookDnsNames" -}}
{{- $svc := include "dra-driver-nvidia-gpu.webhookName" . }}
{{- $ns := include "dra-driver-nvidia-gpu.namespace" . }}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) }}
{{- toJson (concat $names .Values.webhook.tls.certManager.dnsNames | uniq) }}
{{- end }}
