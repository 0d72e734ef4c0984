{{/*
The compute-domain.nvidia.com kubelet plugin: the second container of the plugin DaemonSet
(NVIDIA's "compute-domains" container), included by kubeletplugin.yaml. It publishes the node's
daemon-0 and channel-0, reads the node's clique ID from NVML fabric info (or the fake fleet),
and prepares daemon and channel claims (dra-compute-domain-kubelet-plugin).
*/}}
{{- define "dra-driver-nvidia-gpu.computeDomainPluginContainer" -}}
{{- $fake := eq .Values.devices.backend "fake" }}
{{- $hostImex := eq .Values.resources.computeDomains.imex.mode "hostManaged" }}
{{- $c := .Values.kubeletPlugin.containers.computeDomains }}
{{- $healthPort := int $c.healthcheckPort }}
{{- $pluginDir := printf "%s/compute-domain.nvidia.com" (trimSuffix "/" .Values.kubeletPlugin.kubeletPluginsDirectoryPath) }}
- name: compute-domains
  image: {{ include "dra-driver-nvidia-gpu.image" . | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: ["dra-compute-domain-kubelet-plugin"]
  args:
  - "--node-name=$(NODE_NAME)"
  - "--namespace=$(POD_NAMESPACE)"
  - "--device-backend={{ .Values.devices.backend }}"
  {{- if $fake }}
  - "--fake-gpus={{ include "dra-driver-nvidia-gpu.fakeGpus" . }}"
  {{- else }}
  - "--nvidia-driver-root=/driver-root"
  # Missing IMEX channel nodes are made on the host's /dev (mounted below), so the runtime
  # finds the node the claim's CDI spec names.
  - "--dev-root=/host-dev-root"
  {{- end }}
  - "--cdi-root={{ .Values.kubeletPlugin.cdiRoot }}"
  - "--kubelet-registrar-directory-path={{ .Values.kubeletPlugin.kubeletRegistrarDirectoryPath }}"
  - "--kubelet-plugins-directory-path={{ .Values.kubeletPlugin.kubeletPluginsDirectoryPath }}"
  - "--healthcheck-port={{ $c.healthcheckPort }}"
  {{- if .Values.kubeletPlugin.metrics.enabled }}
  - "--http-endpoint={{ .Values.kubeletPlugin.metrics.computeDomainHttpEndpoint }}"
  - "--metrics-path={{ .Values.kubeletPlugin.metrics.metricsPath }}"
  - "--metrics-insecure={{ .Values.kubeletPlugin.metrics.insecure }}"
  {{- end }}
  - "-v={{ .Values.logVerbosity }}"
  env:
  - name: NODE_NAME
    valueFrom:
      fieldRef:
        fieldPath: spec.nodeName
  - name: POD_NAMESPACE
    valueFrom:
      fieldRef:
        fieldPath: metadata.namespace
  {{- if .Values.kubeletPlugin.perInstanceSockets }}
  # Per-pod socket names: see the gpus container.
  - name: POD_UID
    valueFrom:
      fieldRef:
        fieldPath: metadata.uid
  {{- end }}
  {{- include "dra-driver-nvidia-gpu.imexEnv" . | nindent 2 }}
  - name: IMEX_HOST_SOCKET_PATH
    value: {{ .Values.resources.computeDomains.imex.hostSocketPath | quote }}
  # NVIDIA's gpuCliqueLabelEnabled: the plugin labels its node nvidia.com/gpu.clique.
  - name: GPU_CLIQUE_LABEL_ENABLED
    value: {{ $c.gpuCliqueLabelEnabled | toString | quote }}
  {{- if .Values.altProcDevices }}
  # NVIDIA's altProcDevices: read in place of /proc/devices for the IMEX channels' major.
  - name: ALT_PROC_DEVICES_PATH
    value: /alt-proc-devices
  {{- end }}
  {{- with $c.env }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  securityContext:
    {{- $default := dict "privileged" true }}
    {{- if $fake }}
    {{- $default = dict "runAsUser" 0 "runAsNonRoot" false "privileged" false "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault") }}
    {{- end }}
    {{- toYaml (mergeOverwrite $default (deepCopy $c.securityContext)) | nindent 4 }}
  {{- with $c.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if or .Values.kubeletPlugin.metrics.enabled (ge $healthPort 0) }}
  ports:
  {{- if ge $healthPort 0 }}
  - name: cd-healthz
    containerPort: {{ $healthPort }}
    protocol: TCP
  {{- end }}
  {{- if .Values.kubeletPlugin.metrics.enabled }}
  - name: cd-metrics
    containerPort: {{ .Values.kubeletPlugin.metrics.computeDomainHttpEndpoint | splitList ":" | last | int }}
    protocol: TCP
  {{- end }}
  {{- end }}
  {{- if ge $healthPort 0 }}
  startupProbe:
    grpc:
      port: {{ $healthPort }}
      service: liveness
    periodSeconds: 1
    timeoutSeconds: 5
    failureThreshold: 600
  livenessProbe:
    grpc:
      port: {{ $healthPort }}
      service: liveness
    periodSeconds: 10
    timeoutSeconds: 10
    failureThreshold: 3
  {{- end }}
  volumeMounts:
  - name: plugins-registry
    mountPath: {{ .Values.kubeletPlugin.kubeletRegistrarDirectoryPath | quote }}
  # Bidirectional is not needed: the daemon's config directories are plain directories
  # below this one, bind-mounted into daemon pods by the runtime through CDI.
  - name: compute-domain-plugin-dir
    mountPath: {{ $pluginDir | quote }}
  - name: cdi
    mountPath: {{ .Values.kubeletPlugin.cdiRoot | quote }}
  {{- if not $fake }}
  - name: driver-root
    mountPath: /driver-root
    readOnly: true
    mountPropagation: HostToContainer
  - name: compute-domain-host-dev
    mountPath: /host-dev-root/dev
  {{- end }}
  {{- if and $fake $hostImex }}
  # Host-managed IMEX on fake nodes: the stand-in's socket directory (no driver root here).
  - name: host-imex-socket
    mountPath: {{ dir .Values.resources.computeDomains.imex.hostSocketPath | quote }}
  {{- end }}
  {{- if .Values.altProcDevices }}
  - name: alt-proc-devices
    mountPath: /alt-proc-devices
    readOnly: true
  {{- end }}
  - name: tmp
    mountPath: /tmp
{{- end }}

{{- define "dra-driver-nvidia-gpu.computeDomainPluginVolume" -}}
{{- if and (eq .Values.devices.backend "fake") (eq .Values.resources.computeDomains.imex.mode "hostManaged") }}
- name: host-imex-socket
  hostPath:
    path: {{ dir .Values.resources.computeDomains.imex.hostSocketPath | quote }}
    type: DirectoryOrCreate
{{- end }}
- name: compute-domain-plugin-dir
  hostPath:
    path: {{ printf "%s/compute-domain.nvidia.com" (trimSuffix "/" .Values.kubeletPlugin.kubeletPluginsDirectoryPath) | quote }}
    type: DirectoryOrCreate
{{- if .Values.altProcDevices }}
- name: alt-proc-devices
  hostPath:
    path: {{ .Values.altProcDevices | quote }}
    type: File
{{- end }}
{{- if ne .Values.devices.backend "fake" }}
- name: compute-domain-host-dev
  hostPath:
    path: /dev
    type: Directory
{{- end }}
{{- end }}
