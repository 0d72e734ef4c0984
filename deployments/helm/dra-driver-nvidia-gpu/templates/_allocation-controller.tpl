{{/* Names, labels and the alert rules of the allocation controller (allocation-controller-*.yaml). */}}

{{- define "dra-driver-nvidia-gpu.allocationControllerName" -}}
{{- printf "%s-allocation-controller" (include "dra-driver-nvidia-gpu.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.allocationControllerSelectorLabels" -}}
{{ include "dra-driver-nvidia-gpu.selectorLabels" . }}
app.kubernetes.io/component: allocation-controller
{{- end }}

{{- define "dra-driver-nvidia-gpu.allocationControllerServiceAccountName" -}}
{{- if .Values.allocationController.serviceAccount.create }}
{{- default (include "dra-driver-nvidia-gpu.allocationControllerName" .) .Values.allocationController.serviceAccount.name }}
{{- else }}
{{- required "allocationController.serviceAccount.name is required when allocationController.serviceAccount.create=false" .Values.allocationController.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.allocationControllerLeaseName" -}}
{{- default (include "dra-driver-nvidia-gpu.allocationControllerName" .) .Values.allocationController.leaderElection.leaseName }}
{{- end }}

{{/*
The rule groups, shared by the PrometheusRule and the plain rules file. The seed article's
alert ("pods wait for GPUs") counted every pending claim, so claims created ahead of their
jobs fired it while GPUs were free: it counts the claims that an unschedulable pod waits
for and that no node can satisfy (kube_resourceclaim_unsatisfiable, exported by the leader;
max by claim keeps a claim once if several replicas were scraped during a hand-over),
summed per DeviceClass.
*/}}
{{- define "dra-driver-nvidia-gpu.allocationControllerRuleGroups" -}}
{{- $alerts := .Values.allocationController.alerts -}}
groups:
- name: dra-allocation-controller
  rules:
  - alert: DRAResourceExhausted
    expr: sum by (resource_class) (max by (namespace, name, resource_class) (kube_resourceclaim_unsatisfiable)) > {{ int $alerts.exhaustedThreshold }}
    for: {{ $alerts.for }}
    {{- with $alerts.labels }}
    labels:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    annotations:
      summary: "{{ "{{" }} $labels.resource_class {{ "}}" }} resources exhausted: {{ "{{" }} $value {{ "}}" }} claims waiting for allocation"
      description: "More than {{ int $alerts.exhaustedThreshold }} ResourceClaims of DeviceClass {{ "{{" }} $labels.resource_class {{ "}}" }} that pods wait for have fit on no node for {{ $alerts.for }}; kubectl dra explain pod/NAME says why, and the pods carry DRAUnsatisfiable events."
      {{- with $alerts.runbookUrl }}
      runbook_url: {{ . | quote }}
      {{- end }}
{{- end }}
