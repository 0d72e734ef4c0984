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

{{- /*
CEL (admission matchConditions): the opaque configs at `path` (`object.spec.devices` of a
claim, `object.spec.spec.devices` of a template) include one for a driver the webhook judges.
Every step is guarded with has(), so an object without the fields is simply not matched.
*/}}
{{- define "dra-driver-nvidia-gpu.webhookConfigCel" -}}
{{- $parts := splitList "." . }}
{{- $guards := list }}
{{- range $i, $_ := $parts }}{{- if gt $i 0 }}{{- $guards = append $guards (printf "has(%s)" (join "." (slice $parts 0 (add1 $i)))) }}{{- end }}{{- end }}
{{- printf "(%s && has(%s.config) && %s.config.exists(c, has(c.opaque) && has(c.opaque.driver) && c.opaque.driver in ['gpu.nvidia.com', 'compute-domain.nvidia.com']))" (join " && " $guards) . . }}
{{- end }}

{{- /*
CEL: a selector of a request at `path` (v1/v1beta2 `exactly` and `firstAvailable`, v1beta1's
request-level `selectors`) mentions gpu.nvidia.com (the webhook may warn about its names).
*/}}
{{- define "dra-driver-nvidia-gpu.webhookSelectorCel" -}}
{{- $parts := splitList "." . }}
{{- $guards := list }}
{{- range $i, $_ := $parts }}{{- if gt $i 0 }}{{- $guards = append $guards (printf "has(%s)" (join "." (slice $parts 0 (add1 $i)))) }}{{- end }}{{- end }}
{{- $mentions := "s.exists(x, has(x.cel) && has(x.cel.expression) && x.cel.expression.contains('gpu.nvidia.com'))" }}
{{- printf "(%s && has(%s.requests) && %s.requests.exists(r, (has(r.exactly) && has(r.exactly.selectors) && %s) || (has(r.selectors) && %s) || (has(r.firstAvailable) && r.firstAvailable.exists(f, has(f.selectors) && %s))))" (join " && " $guards) . . ($mentions | replace "s.exists" "r.exactly.selectors.exists") ($mentions | replace "s.exists" "r.selectors.exists") ($mentions | replace "s.exists" "f.selectors.exists") }}
{{- end }}

{{- /*
CEL: the request creates a ResourceClaim that Kubernetes' resourceclaim controller makes for a
pod (or pod group) from a ResourceClaimTemplate: the controller's identity (its own service
account under --use-service-account-credentials, kubeadm's default, or the controller
manager's shared one) and the pod-claim-name annotation it always sets. Such a claim's spec is
the template's, which the webhook judged when the template was written.
*/}}
{{- define "dra-driver-nvidia-gpu.webhookClaimFromTemplateCel" -}}
request.operation == 'CREATE' && request.userInfo.username in ['system:serviceaccount:kube-system:resource-claim-controller', 'system:kube-controller-manager'] && has(object.metadata.annotations) && 'resource.kubernetes.io/pod-claim-name' in object.metadata.annotations
{{- end }}
