{{- define "kopfka.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kopfka.labels" -}}
app.kubernetes.io/name: kopfka-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "kopfka.selectorLabels" -}}
app.kubernetes.io/name: kopfka-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kopfka.serviceAccountName" -}}
{{- default (include "kopfka.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "kopfka.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The namespaces a namespaced install watches: the listed ones, else the release's. */}}
{{- define "kopfka.watchNamespaces" -}}
{{- if .Values.watch.namespaces -}}
{{- join "," .Values.watch.namespaces -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* Least privilege: what the operator reads and writes, nothing more. */}}
{{- define "kopfka.rules" -}}
- apiGroups: ["kopfka.io"]
  resources: ["kafkaclusters", "topics", "quotas", "users"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["kopfka.io"]
  resources: ["kafkaclusters/status", "topics/status", "quotas/status", "users/status"]
  verbs: ["get", "patch"]
# secrets: the CAs, the nodes' and the operator's certificates, Users' passwords and certificates
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "create", "patch"]
# services, ingresses: list and delete for the per-broker ones of external listeners (scale-down,
# listener removed)
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "list", "create", "patch", "delete"]
# configmaps: delete and list for server.properties revisions no pod mounts any more
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "create", "patch"]
# statefulsets: delete (orphaning the pods) is how a set gets new volume claim templates (JBOD)
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# pods: delete is how the roller restarts a pod (the StatefulSet recreates it); patch marks a
# broker whose external address changed for a restart
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "patch", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["list", "delete"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}
