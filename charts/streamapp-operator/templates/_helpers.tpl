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
# Only the verbs the operator's calls use (streamapp_operator.k8s, and kopf: it lists, watches and patches the
# resources it serves, patches their status and creates events; it never updates with PUT).
# StreamApps: kopf's finalizer and bookkeeping annotations (patch); read by name; a handover creates the new
# version and deletes the old one (handover.oldVersion: Delete); the operator patches their status.
- apiGroups: ["streamapp.io"]
  resources: ["streamapps"]
  verbs: ["get", "list", "watch", "patch", "create", "delete"]
- apiGroups: ["streamapp.io"]
  resources: ["streamapps/status"]
  verbs: ["patch"]
# A handover with outputs TakeOver stops the old version (spec.replicas 0) and scales it back on failure.
- apiGroups: ["streamapp.io"]
  resources: ["streamapps/scale"]
  verbs: ["patch"]
# Setting blockOwnerDeletion in the children's ownerReferences (OwnerReferencesPermissionEnforcement).
- apiGroups: ["streamapp.io"]
  resources: ["streamapps/finalizers"]
  verbs: ["update"]
# Children: read by name (one of that name it does not own is named, never applied over), server-side apply
# creates (create) and updates (patch) them; the garbage collector deletes ConfigMaps and Services with their
# owner; a StatefulSet is deleted by spec.cleanupPolicy Delete, a PodDisruptionBudget when there must be none
# (every budget of the namespace is listed: someone else's may cover the pods already).
- apiGroups: [""]
  resources: ["configmaps", "services"]
  verbs: ["get", "create", "patch"]
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "create", "patch", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "create", "patch", "delete"]
# Pods are only listed: why they are not ready, their IPs for /status (restores, failing stream threads), a
# replay Job's pods (why they do not start).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
# Kafka credentials of spec.kafka.authentication / spec.kafka.tls, for the operator's own admin client: each
# Secret is read by name, never listed or watched.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
# State volumes of scaled-away pods: listed, marked with the time of the scale-down (patch), deleted after
# spec.state.retainAfterScaleDown (docs/operator.md "Scaling and state volumes"). Deleting the app removes them
# through the StatefulSet's persistentVolumeClaimRetentionPolicy (whenDeleted: Delete under cleanupPolicy Delete).
# get: the claims the StatefulSet would mount are read first; one someone else owns is named (ForeignObject).
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "patch", "delete"]
# Events: written about StreamApps and StreamReplays (kopf creates them); the FailedCreate events of a
# StatefulSet (PodsFailing: a quota or an admission webhook refused its pods) and of a replay's Job (its pod
# cannot be created) are listed.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["list", "create"]
# StreamReplays (docs/replay.md "The operator"): kopf's bookkeeping, their status; the replay's Job and its
# ConfigMap (above) are owned by the StreamReplay (blockOwnerDeletion); the Job is deleted when its pod never
# starts or its app is gone.
- apiGroups: ["streamapp.io"]
  resources: ["streamreplays"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["streamapp.io"]
  resources: ["streamreplays/status"]
  verbs: ["patch"]
- apiGroups: ["streamapp.io"]
  resources: ["streamreplays/finalizers"]
  verbs: ["update"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "create", "patch", "delete"]
# The replay pod's log: its progress reports, and its last line says what it wrote, or why it failed.
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
# The replay Job's ServiceAccount streamapp-replay: no token mounted, bound to no role (it needs Kafka only).
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "create", "patch"]
{{- end }}
