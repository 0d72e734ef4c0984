{{/*
The kubelet plugin's node affinity, as YAML (empty for none):
- kubeletPlugin.affinity when it is set;
- NVIDIA's default terms with backend=nvml when it is left at {} (nodes NFD or the GPU Operator
  labelled as having an NVIDIA GPU);
- none with backend=fake, or when it is null (NVIDIA users' way to drop the NFD affinity:
  `--set kubeletPlugin.affinity=null` or `affinity: null` in a values file).
*/}}
{{- define "dra-driver-nvidia-gpu.kubeletPluginAffinity" -}}
{{- if .Values.kubeletPlugin.affinity }}
{{- toYaml .Values.kubeletPlugin.affinity }}
{{- else if and (ne .Values.devices.backend "fake") (kindIs "map" .Values.kubeletPlugin.affinity) }}
nodeAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
    # NVIDIA's default terms. Node Feature Discovery: an NVIDIA PCI device (vendor 10de)
    # is present.
    - matchExpressions:
      - key: feature.node.kubernetes.io/pci-10de.present
        operator: In
        values: ["true"]
    # NFD: an NVIDIA 3D controller (PCI class 0302) is present.
    - matchExpressions:
      - key: feature.node.kubernetes.io/pci-0302_10de.present
        operator: In
        values: ["true"]
    # NFD: an NVIDIA VGA compatible controller (PCI class 0300) is present.
    - matchExpressions:
      - key: feature.node.kubernetes.io/pci-0300_10de.present
        operator: In
        values: ["true"]
    # Node Feature Discovery on Tegra: the CPU vendor is NVIDIA.
    - matchExpressions:
      - key: feature.node.kubernetes.io/cpu-model.vendor_id
        operator: In
        values: ["NVIDIA"]
    # GPU Operator: the node has a GPU.
    - matchExpressions:
      - key: nvidia.com/gpu.present
        operator: In
        values: ["true"]
{{- end }}
{{- end }}

{{/*
The names of the nodes the kubelet plugin's DaemonSet can run on, as a JSON list, from
(dict "root" $ "nodes" <Node objects>): kubeletPlugin.nodeSelector, then the required node
affinity's terms (any term; in a term every matchExpression: In, NotIn, Exists,
DoesNotExist). Gt, Lt and matchFields are not evaluated here and count as matching, so the
NOTES never warn about a node the scheduler would take.
*/}}
{{- define "dra-driver-nvidia-gpu.kubeletPluginNodes" -}}
{{- $root := .root }}
{{- $affinity := include "dra-driver-nvidia-gpu.kubeletPluginAffinity" $root | fromYaml }}
{{- $terms := list }}
{{- with $affinity.nodeAffinity }}
{{- with .requiredDuringSchedulingIgnoredDuringExecution }}
{{- $terms = .nodeSelectorTerms | default list }}
{{- end }}
{{- end }}
{{- $matched := list }}
{{- range $node := .nodes }}
{{- $labels := $node.metadata.labels | default dict }}
{{- $ok := true }}
{{- range $key, $value := $root.Values.kubeletPlugin.nodeSelector }}
{{- if not (and (hasKey $labels $key) (eq (toString (get $labels $key)) (toString $value))) }}
{{- $ok = false }}
{{- end }}
{{- end }}
{{- if and $ok $terms }}
{{- $any := false }}
{{- range $term := $terms }}
{{- $all := or $term.matchExpressions $term.matchFields | empty | not }}
{{- range $e := $term.matchExpressions | default list }}
{{- $has := hasKey $labels $e.key }}
{{- $in := and $has (has (toString (get $labels $e.key)) ($e.values | default list)) }}
{{- if and (eq $e.operator "In") (not $in) }}{{ $all = false }}{{ end }}
{{- if and (eq $e.operator "NotIn") $in }}{{ $all = false }}{{ end }}
{{- if and (eq $e.operator "Exists") (not $has) }}{{ $all = false }}{{ end }}
{{- if and (eq $e.operator "DoesNotExist") $has }}{{ $all = false }}{{ end }}
{{- end }}
{{- if $all }}{{ $any = true }}{{ end }}
{{- end }}
{{- $ok = $any }}
{{- end }}
{{- if $ok }}{{ $matched = append $matched $node.metadata.name }}{{ end }}
{{- end }}
{{- toJson $matched }}
{{- end }}
