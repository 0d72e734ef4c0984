{{/* Chart name, truncated to the 63 characters of a label value. */}}
{{- define "dra-driver-nvidia-gpu.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, prefixed to the chart name unless it holds it. */}}
{{- define "dra-driver-nvidia-gpu.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The namespace every namespaced object goes to. */}}
{{- define "dra-driver-nvidia-gpu.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels selecting the release's pods: selectorLabelsOverride when set (NVIDIA's value). */}}
{{- define "dra-driver-nvidia-gpu.selectorLabels" -}}
{{- if .Values.selectorLabelsOverride }}
{{- toYaml .Values.selectorLabelsOverride }}
{{- else }}
app.kubernetes.io/name: {{ include "dra-driver-nvidia-gpu.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.labels" -}}
helm.sh/chart: {{ include "dra-driver-nvidia-gpu.chart" . }}
{{ include "dra-driver-nvidia-gpu.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (printf "%s-kubelet-plugin" (include "dra-driver-nvidia-gpu.fullname" .)) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create=false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The resource.k8s.io version for DeviceClasses: the value when set, otherwise the newest version
the cluster serves (Helm's default capabilities when rendering offline).
*/}}
{{- define "dra-driver-nvidia-gpu.resourceApiVersion" -}}
{{- if .Values.resourceApiVersion }}
{{- .Values.resourceApiVersion }}
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1" }}
{{- "resource.k8s.io/v1" }}
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1beta2" }}
{{- "resource.k8s.io/v1beta2" }}
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1beta1" }}
{{- "resource.k8s.io/v1beta1" }}
{{- end }}
{{- end }}

{{/* The fake fleet spec: a string, or a list joined with commas; empty means 8xH100-80GB. */}}
{{- define "dra-driver-nvidia-gpu.fakeGpus" -}}
{{- $spec := .Values.devices.fakeGpus }}
{{- if kindIs "slice" $spec }}{{ $spec = join "," $spec }}{{ end }}
{{- default "8xH100-80GB" $spec }}
{{- end }}

{{/* The DRA driver names this release publishes ResourceSlices for. */}}
{{- define "dra-driver-nvidia-gpu.drivers" -}}
{{- $drivers := list }}
{{- if .Values.resources.gpus.enabled }}{{ $drivers = append $drivers "gpu.nvidia.com" }}{{ end }}
{{- if .Values.resources.computeDomains.enabled }}{{ $drivers = append $drivers "compute-domain.nvidia.com" }}{{ end }}
{{- toJson $drivers }}
{{- end }}

{{/*
The kubelet plugin container's securityContext. The fake backend only writes sockets, CDI specs
and its checkpoint into root-owned host directories: root without any capability suffices. The
NVML backend opens /dev/nvidia* and reconfigures MIG, which needs a privileged container.
Values in kubeletPlugin.containers.gpus.securityContext override these defaults key by key.
*/}}
{{- define "dra-driver-nvidia-gpu.kubeletPluginSecurityContext" -}}
{{- $default := dict }}
{{- if eq .Values.devices.backend "fake" }}
{{- $default = dict "runAsUser" 0 "runAsNonRoot" false "privileged" false "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault") }}
{{- else }}
{{- $default = dict "privileged" true }}
{{- end }}
{{- toYaml (mergeOverwrite $default (deepCopy .Values.kubeletPlugin.containers.gpus.securityContext)) }}
{{- end }}

{{/*
The plugin's feature gates (JSON): gates, name -> default, maturity, whether this project acts on it and
(offImplemented, where false) that its off behaviour is not built, and rules, NVIDIA's dependency
rules. The chart's copy of the plugin's table
(dra_kubelet_core.nvidia_gates), as are the featureGates properties of values.schema.json;
a chart test keeps all three equal.
*/}}
{{- define "dra-driver-nvidia-gpu.gateTable" -}}
{
"gates": {
  "TimeSlicingSettings": {"default": false, "maturity": "alpha", "implemented": true},
  "MPSSupport": {"default": false, "maturity": "alpha", "implemented": true},
  "IMEXDaemonsWithDNSNames": {"default": true, "maturity": "beta", "implemented": true, "offImplemented": false},
  "PassthroughSupport": {"default": false, "maturity": "alpha", "implemented": true},
  "NVMLDeviceHealthCheck": {"default": false, "maturity": "alpha", "implemented": false},
  "DynamicMIG": {"default": false, "maturity": "alpha", "implemented": true},
  "ComputeDomainCliques": {"default": true, "maturity": "beta", "implemented": true, "offImplemented": false},
  "CrashOnNVLinkFabricErrors": {"default": true, "maturity": "beta", "implemented": true},
  "DeviceMetadata": {"default": false, "maturity": "alpha", "implemented": true},
  "FabricManagerPartitioning": {"default": false, "maturity": "alpha", "implemented": true},
  "HostManagedIMEXDaemon": {"default": false, "maturity": "alpha", "implemented": true},
  "NodeLocalFabricIPC": {"default": false, "maturity": "alpha", "implemented": false},
  "DRAListTypeAttributes": {"default": false, "maturity": "alpha", "implemented": true},
  "ConsumableShares": {"default": false, "maturity": "alpha", "implemented": true},
  "ContextualLogging": {"default": true, "maturity": "beta", "implemented": false},
  "LoggingAlphaOptions": {"default": false, "maturity": "alpha", "implemented": false},
  "LoggingBetaOptions": {"default": true, "maturity": "beta", "implemented": false},
  "DeviceHealthCheck": {"default": true, "maturity": "beta", "implemented": true},
  "DeviceTaints": {"default": true, "maturity": "beta", "implemented": true}
},
"rules": [
  {"gate": "ComputeDomainCliques", "kind": "requires", "other": "IMEXDaemonsWithDNSNames"},
  {"gate": "DynamicMIG", "kind": "excludes", "other": "PassthroughSupport"},
  {"gate": "DynamicMIG", "kind": "excludes", "other": "NVMLDeviceHealthCheck"},
  {"gate": "DynamicMIG", "kind": "excludes", "other": "MPSSupport"},
  {"gate": "PassthroughSupport", "kind": "excludes", "other": "NVMLDeviceHealthCheck"},
  {"gate": "DeviceMetadata", "kind": "requires", "other": "PassthroughSupport"}
]
}
{{- end }}

{{/*
Every gate's effective value (JSON): featureGates over the defaults; AllAlpha and AllBeta (as in
Kubernetes' component-base) set each alpha (beta) gate that featureGates does not name.
*/}}
{{- define "dra-driver-nvidia-gpu.effectiveGates" -}}
{{- $table := include "dra-driver-nvidia-gpu.gateTable" . | fromJson }}
{{- $all := dict "alpha" "AllAlpha" "beta" "AllBeta" }}
{{- $gates := dict }}
{{- range $name, $gate := $table.gates }}
{{- $special := get $all $gate.maturity }}
{{- if hasKey $.Values.featureGates $name }}
{{- $_ := set $gates $name (get $.Values.featureGates $name) }}
{{- else if and $special (hasKey $.Values.featureGates $special) }}
{{- $_ := set $gates $name (get $.Values.featureGates $special) }}
{{- else }}
{{- $_ := set $gates $name $gate.default }}
{{- end }}
{{- end }}
{{- toJson $gates }}
{{- end }}

{{/*
What this release was asked for that the chart accepts (NVIDIA's values) but this project has not
built yet, one "key: what" line each; empty when nothing.
*/}}
{{- define "dra-driver-nvidia-gpu.notImplemented" -}}
{{- $v := .Values }}
{{- $table := include "dra-driver-nvidia-gpu.gateTable" . | fromJson }}
{{- range $name := keys $v.featureGates | sortAlpha }}
{{- $gate := get $table.gates $name }}
{{- if not $gate }}
{{- else if not $gate.implemented }}
featureGates.{{ $name }}={{ get $v.featureGates $name }}: the plugin accepts the gate, nothing acts on it yet
{{- else if and (not (get $v.featureGates $name)) (hasKey $gate "offImplemented") (not $gate.offImplemented) }}
featureGates.{{ $name }}=false: NVIDIA's off behaviour is not built; the driver behaves as with true
{{- end }}
{{- end }}
{{- if $v.maskNvidiaDriverParams }}
maskNvidiaDriverParams: the driver's params file is not masked
{{- end }}
{{- if $v.kubeletPlugin.networkPolicy.enabled }}
kubeletPlugin.networkPolicy.enabled: no NetworkPolicy is installed
{{- end }}
{{- if $v.controller.networkPolicy.enabled }}
controller.networkPolicy.enabled: no NetworkPolicy is installed
{{- end }}
{{- end }}

{{/* featureGates as the components' --feature-gates value: Gate=true,Other=false (sorted). */}}
{{- define "dra-driver-nvidia-gpu.featureGatesValue" -}}
{{- range $i, $k := keys .Values.featureGates | sortAlpha }}{{ if $i }},{{ end }}{{ $k }}={{ get $.Values.featureGates $k }}{{ end }}
{{- end }}

{{/*
NVIDIA's IMEX settings of the compute-domain controller and plugin (environment): the mode,
the isolation and the feature gates (HostManagedIMEXDaemon unlocks hostManaged).
*/}}
{{- define "dra-driver-nvidia-gpu.imexEnv" -}}
- name: IMEX_MODE
  value: {{ .Values.resources.computeDomains.imex.mode | quote }}
- name: IMEX_ISOLATION
  value: {{ .Values.resources.computeDomains.imex.isolation | quote }}
- name: FEATURE_GATES
  value: {{ include "dra-driver-nvidia-gpu.featureGatesValue" . | quote }}
{{- end }}

{{/*
The kubelet plugin DaemonSet's updateStrategy: kubeletPlugin.updateStrategy, with maxSurge
dropped when maxUnavailable is non-zero (Kubernetes allows only one of them non-zero, and
NVIDIA's values file sets maxUnavailable "100%" over this chart's surge default) and
rollingUpdate dropped for OnDelete. Fails when a surge would run two plugin pods on a node
with the classic socket names (kubeletPlugin.perInstanceSockets=false).
*/}}
{{- define "dra-driver-nvidia-gpu.kubeletPluginUpdateStrategy" -}}
{{- $strategy := deepCopy (.Values.kubeletPlugin.updateStrategy | default dict) }}
{{- if eq (toString (get $strategy "type")) "OnDelete" }}
{{- $_ := unset $strategy "rollingUpdate" }}
{{- end }}
{{- $rolling := get $strategy "rollingUpdate" | default dict }}
{{- $zero := list "" "0" "0%" "<nil>" }}
{{- if not (has (toString (get $rolling "maxUnavailable")) $zero) }}
{{- $_ := unset $rolling "maxSurge" }}
{{- end }}
{{- if and (not (has (toString (get $rolling "maxSurge")) $zero)) (not .Values.kubeletPlugin.perInstanceSockets) }}
{{- fail (printf "\nkubeletPlugin.updateStrategy.rollingUpdate.maxSurge=%v runs an old and a new plugin pod on each node at once, which needs kubeletPlugin.perInstanceSockets=true (kubelet 1.33 or newer).\nWith perInstanceSockets=false (older kubelets) set maxSurge=0 and a non-zero maxUnavailable, e.g. --set kubeletPlugin.updateStrategy.rollingUpdate.maxSurge=0,kubeletPlugin.updateStrategy.rollingUpdate.maxUnavailable=1." (get $rolling "maxSurge")) }}
{{- end }}
{{- toYaml $strategy }}
{{- end }}
