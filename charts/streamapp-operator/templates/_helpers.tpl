{{/* The chart name, truncated to a DNS label. */}}
{{- define "streamapp-operator.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the release name when it already contains the chart name. */}}
{{- define "streamapp-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* Labels of every object of the chart. */}}
{{- define "streamapp-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "streamapp-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the operator pod. */}}
{{- define "streamapp-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamapp-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The operator's ServiceAccount name. */}}
{{- define "streamapp-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "streamapp-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The ServiceAccount as an RBAC subject. */}}
{{- define "streamapp-operator.subject" -}}
- kind: ServiceAccount
  name: {{ include "streamapp-operator.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/* The ServiceAccount's user name, as the API server sees the operator's requests. */}}
{{- define "streamapp-operator.userName" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "streamapp-operator.serviceAccountName" . }}
{{- end }}

{{/*
What the operator does with StreamApps and their children, in the namespaces it serves: the rules of the
ClusterRole (every namespace) or of the Role in each watched namespace. Nothing here is cluster-scoped.
*/}}
{{- define "streamapp-operator.appRules" -}}
# kopf patches its finalizer and bookkeeping annotations; the operator writes status.
- apiGroups: ["streamapp.io"]
  resources: ["streamapps"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["streamapp.io"]
  resources: ["streamapps/status"]
  verbs: ["get", "patch", "update"]
# Setting blockOwnerDeletion in the children's ownerReferences (OwnerReferencesPermissionEnforcement).
- apiGroups: ["streamapp.io"]
  resources: ["streamapps/finalizers"]
  verbs: ["update"]
# Children: server-side apply creates (create) and updates (patch) them; listed to find objects of the same
# name it does not own; deleted when a spec change or spec.cleanupPolicy says so.
- apiGroups: [""]
  resources: ["configmaps", "services"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# Pods are only read: why they are not ready, and their /status (restores, failing stream threads).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
# Kafka credentials of spec.kafka.authentication / spec.kafka.tls, for the operator's own admin client.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch"]
# State volumes of scaled-away pods: listed, marked with the time of the scale-down (patch), deleted after
# spec.state.retainAfterScaleDown (docs/operator.md "Scaling and state volumes"). Deleting the app removes them
# through the StatefulSet's persistentVolumeClaimRetentionPolicy (whenDeleted: Delete under cleanupPolicy Delete).
# get: the claims the StatefulSet would mount are read first; one someone else owns is named (ForeignObject).
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "patch", "delete"]
# Events: written about StreamApps; a StatefulSet's FailedCreate events are listed (PodsFailing: a quota or an
# admission webhook refused its pods).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["list", "create", "patch"]
# StreamReplays (docs/replay.md "The operator"): their status; the replay's Job and its ConfigMap (above) are
# owned by the StreamReplay (blockOwnerDeletion). A handover creates the new version's StreamApp and deletes
# the old one (handover.oldVersion: Delete).
- apiGroups: ["streamapp.io"]
  resources: ["streamreplays"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["streamapp.io"]
  resources: ["streamreplays/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["streamapp.io"]
  resources: ["streamreplays/finalizers"]
  verbs: ["update"]
- apiGroups: ["streamapp.io"]
  resources: ["streamapps"]
  verbs: ["create", "delete"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# The replay pod's last log line says what it wrote, or why it failed.
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
# The replay Job's ServiceAccount streamapp-replay: no token mounted, bound to no role (it needs Kafka only).
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "create", "patch"]
{{- end }}
