{{/* Prometheus Operator objects: the true|false|auto switches, their labels, the GPU pod rules. */}}

{{/*
"true" when monitoring.<key> renders its object: true always, false never, auto when the
cluster serves monitoring.coreos.com/v1/<kind> (.Capabilities; `helm template` needs
--api-versions). Called with (dict "root" $ "key" "podMonitor" "kind" "PodMonitor").
*/}}
{{- define "dra-driver-nvidia-gpu.monitoringRenders" -}}
{{- $mode := toString (index .root.Values.monitoring .key) -}}
{{- if eq $mode "true" -}}
true
{{- else if and (eq $mode "auto") (.root.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" .kind)) -}}
true
{{- end -}}
{{- end }}

{{/* Why an object did not render, for NOTES ("" when it did). Same arguments. */}}
{{- define "dra-driver-nvidia-gpu.monitoringSkipped" -}}
{{- $mode := toString (index .root.Values.monitoring .key) -}}
{{- if eq $mode "false" -}}
monitoring.{{ .key }}=false
{{- else if ne (include "dra-driver-nvidia-gpu.monitoringRenders" .) "true" -}}
monitoring.{{ .key }}=auto and this cluster (or `helm template` without --api-versions) does not serve monitoring.coreos.com/v1/{{ .kind }}; set monitoring.{{ .key }}=true to render it anyway
{{- end -}}
{{- end }}

{{/* monitoring.labels (a YAML map, "" when none). */}}
{{- define "dra-driver-nvidia-gpu.monitoringLabels" -}}
{{- with .Values.monitoring.labels }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.gpuPodMetricsName" -}}
{{- printf "%s-gpu-pod-metrics" (include "dra-driver-nvidia-gpu.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Recording rules: dcgm-exporter's series of a DRA-allocated GPU carry no pod (the kubelet's
PodResources API names no GPU UUID for DRA devices); the plugin's
nvidia_dra_device_allocation_info does, keyed by dcgm-exporter's UUID (the GPU's, a MIG
device's parent's) and GPU_I_ID (MIG GPU instance, empty for a full GPU). The info series is
the "many" side (a shared GPU has one per pod), each DCGM series reduced to one per
(UUID, GPU_I_ID) first; namespace and pod of the result are the workload's, not those of
the exporter pod a scrape may have attached. The info series' container label (one series per
container using the claim) is left out of the "by": a GPU shared by containers of one pod stays
one series per pod and device, so sums over a pod's devices count each GPU once; join
nvidia_dra_device_allocation_info on (namespace, pod, container) for a container's view.
*/}}
{{- define "dra-driver-nvidia-gpu.gpuPodRuleGroups" -}}
groups:
- name: dra-gpu-pod-metrics
  rules:
  {{- range .Values.monitoring.gpuPodMetrics.dcgmMetrics }}
  - record: namespace_pod:{{ . }}:max
    expr: max by (UUID, GPU_I_ID) ({{ . }}) * on (UUID, GPU_I_ID) group_right max by (namespace, pod, claim, request, device, node, UUID, GPU_I_ID, mig_uuid) (nvidia_dra_device_allocation_info)
  {{- end }}
{{- end }}

{{/* NOTES: where the metrics, the alert and the dashboard are, and what did not render. */}}
{{- define "dra-driver-nvidia-gpu.monitoringNotes" -}}
{{- $ns := include "dra-driver-nvidia-gpu.namespace" . }}
{{- $ac := .Values.allocationController }}
{{- $sm := dict "root" . "key" "serviceMonitor" "kind" "ServiceMonitor" }}
{{- $pm := dict "root" . "key" "podMonitor" "kind" "PodMonitor" }}
{{- $pr := dict "root" . "key" "prometheusRule" "kind" "PrometheusRule" }}
{{- $plugins := and .Values.kubeletPlugin.metrics.enabled (or .Values.resources.gpus.enabled .Values.resources.computeDomains.enabled) }}

Monitoring:
{{- if $plugins }}
  - Kubelet plugin metrics (nvidia_dra_*, per-pod nvidia_dra_device_allocation_info): port "metrics" ({{ .Values.kubeletPlugin.metrics.gpuHttpEndpoint }}{{ .Values.kubeletPlugin.metrics.metricsPath }}) of each pod of daemonset/{{ include "dra-driver-nvidia-gpu.fullname" . }}-kubelet-plugin;
    {{- with include "dra-driver-nvidia-gpu.monitoringSkipped" $pm }} no PodMonitor ({{ . }}).{{ else }} PodMonitor {{ $ns }}/{{ include "dra-driver-nvidia-gpu.fullname" $ }}-kubelet-plugin.{{ end }}
{{- end }}
{{- if $ac.enabled }}
  - Allocation controller metrics (kube_resourceclaim_*, node_dra_resource_available): service/{{ include "dra-driver-nvidia-gpu.allocationControllerName" . }} port "metrics" (/metrics);
    {{- if not $ac.serviceMonitor.enabled }} no ServiceMonitor (allocationController.serviceMonitor.enabled=false).{{ else }}{{ with include "dra-driver-nvidia-gpu.monitoringSkipped" $sm }} no ServiceMonitor ({{ . }}).{{ else }} ServiceMonitor {{ $ns }}/{{ include "dra-driver-nvidia-gpu.allocationControllerName" $ }}.{{ end }}{{ end }}
{{- if $ac.alerts.enabled }}
  - Alert DRAResourceExhausted (runbook: {{ $ac.alerts.runbookUrl | default "docs/runbooks/DRAResourceExhausted.md" }}):
    {{- if eq (include "dra-driver-nvidia-gpu.monitoringRenders" $pr) "true" }} PrometheusRule {{ $ns }}/{{ include "dra-driver-nvidia-gpu.allocationControllerName" . }}.{{ else }} ConfigMap {{ $ns }}/{{ include "dra-driver-nvidia-gpu.allocationControllerName" . }}-rules, key dra-allocation-controller.rules.yaml, for Prometheus's rule_files ({{ include "dra-driver-nvidia-gpu.monitoringSkipped" $pr }}).{{ end }}
{{- end }}
{{- if $ac.dashboard.enabled }}
  - Grafana dashboard: ConfigMap {{ $ac.dashboard.namespace | default $ns }}/{{ include "dra-driver-nvidia-gpu.allocationControllerName" . }}-dashboard, key dra-allocation.json, labels {{ $ac.dashboard.labels | toJson }} (for Grafana's sidecar: its label and namespace settings must match).
{{- end }}
{{- end }}
{{- if and .Values.webhook.enabled .Values.webhook.metrics.enabled }}
  - Webhook review latency (dra_webhook_review_duration_seconds): service/{{ include "dra-driver-nvidia-gpu.webhookName" . }} port "metrics" (/metrics, plain HTTP); no ServiceMonitor is rendered for it.
{{- end }}
{{- if and .Values.resources.gpus.enabled .Values.monitoring.gpuPodMetrics.enabled .Values.monitoring.gpuPodMetrics.dcgmMetrics }}
  - GPU use per pod (recording rules namespace_pod:<DCGM metric>:max; needs dcgm-exporter's series in the same Prometheus):
    {{- if eq (include "dra-driver-nvidia-gpu.monitoringRenders" $pr) "true" }} PrometheusRule {{ $ns }}/{{ include "dra-driver-nvidia-gpu.gpuPodMetricsName" . }}.{{ else }} ConfigMap {{ $ns }}/{{ include "dra-driver-nvidia-gpu.gpuPodMetricsName" . }}-rules, key dra-gpu-pod-metrics.rules.yaml ({{ include "dra-driver-nvidia-gpu.monitoringSkipped" $pr }}).{{ end }}
{{- end }}
{{- if not .Values.monitoring.labels }}
  - kube-prometheus-stack selects ServiceMonitors, PodMonitors and PrometheusRules by its release label: set monitoring.labels.release=<its release name>.
{{- end }}
{{- end }}

{{/* The scrape settings of a monitor endpoint: https with the scraper's token unless insecure. */}}
{{- define "dra-driver-nvidia-gpu.secureScrape" -}}
{{- if not .insecure }}
scheme: https
tlsConfig:
  # The endpoints' certificates are self-signed at start (or given): encryption, no pinning.
  insecureSkipVerify: true
authorization:
  type: Bearer
  credentials:
    name: {{ printf "%s-metrics-reader" (include "dra-driver-nvidia-gpu.fullname" .root) | trunc 63 | trimSuffix "-" }}-token
    key: token
{{- end }}
{{- end }}
