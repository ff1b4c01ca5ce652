{{/* Names: the usual Helm conventions, truncated to fit a DNS label. */}}
{{- define "berth.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "berth.fullname" -}}
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

{{/* <fullname>-<suffix>, still a DNS label. */}}
{{- define "berth.suffixed" -}}
{{- printf "%s-%s" (include "berth.fullname" .root | trunc (int (sub 62 (len .suffix))) | trimSuffix "-") .suffix }}
{{- end }}

{{- define "berth.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "berth.labels" -}}
{{ include "berth.commonLabels" . }}
{{ include "berth.selectorLabels" . }}
{{- end }}

{{/* Labels of every object, without the component (selectors use that). */}}
{{- define "berth.commonLabels" -}}
helm.sh/chart: {{ include "berth.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: berth
{{- end }}

{{- define "berth.selectorLabels" -}}
app.kubernetes.io/name: {{ include "berth.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: berth
{{- end }}

{{- define "berth.kubeScheduler.labels" -}}
{{ include "berth.commonLabels" . }}
{{ include "berth.kubeScheduler.selectorLabels" . }}
{{- end }}

{{- define "berth.kubeScheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "berth.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: kube-scheduler
{{- end }}

{{- define "berth.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "berth.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "berth.kubeScheduler.fullname" -}}
{{- include "berth.suffixed" (dict "root" . "suffix" "kube-scheduler") }}
{{- end }}

{{/* repository:tag or repository@digest. */}}
{{- define "berth.imageRef" -}}
{{- if .image.digest }}
{{- printf "%s@%s" .image.repository .image.digest }}
{{- else }}
{{- printf "%s:%s" .image.repository (default .default .image.tag | toString) }}
{{- end }}
{{- end }}

{{- define "berth.image" -}}
{{- include "berth.imageRef" (dict "image" .Values.image "default" .Chart.AppVersion) }}
{{- end }}

{{/* The extender role's kube-scheduler tag when none is set: the cluster's
release, without a vendor's build suffix (registry.k8s.io tags are vX.Y.Z). */}}
{{- define "berth.kubeScheduler.defaultTag" -}}
{{- regexReplaceAll "[-+].*$" .Capabilities.KubeVersion.Version "" }}
{{- end }}

{{- define "berth.leaseName" -}}
{{- default (include "berth.fullname" .) .Values.leaderElection.resourceName }}
{{- end }}

{{- define "berth.kubeScheduler.leaseName" -}}
{{- default (include "berth.kubeScheduler.fullname" .) .Values.kubeScheduler.leaderElection.resourceName }}
{{- end }}

{{- define "berth.tlsSecretName" -}}
{{- default (include "berth.suffixed" (dict "root" . "suffix" "tls")) .Values.tls.secretName }}
{{- end }}

{{- define "berth.extenderProfile" -}}
{{- default .Values.schedulerName .Values.extender.profile }}
{{- end }}

{{/* Where the chart's kube-scheduler reaches Berth's extender. */}}
{{- define "berth.extenderURL" -}}
{{- printf "%s://%s.%s.svc:%d%s" (ternary "https" "http" (eq (include "berth.tls" .) "true")) (include "berth.fullname" .) .Release.Namespace (int .Values.http.port) .Values.extender.urlPrefix }}
{{- end }}

{{- define "berth.tlsDir" -}}/etc/berth/tls{{- end }}

{{/* The gRPC bearer token: a Secret (key `token`) mounted here. */}}
{{- define "berth.grpcTokenDir" -}}/etc/berth/grpc-auth{{- end }}

{{- define "berth.grpcTokenSecretName" -}}
{{- default (include "berth.suffixed" (dict "root" . "suffix" "grpc-token")) .Values.grpc.auth.existingSecret }}
{{- end }}

{{/*
The BerthConfiguration. Chart-owned fields (http, grpc, ui, extender,
leaderElection, runSchedulingLoop) come last so `config` cannot override them
(the schema also rejects them there).
*/}}
{{- define "berth.config" -}}
{{- $tlsDir := include "berth.tlsDir" . -}}
{{- $profiles := .Values.profiles -}}
{{- if not $profiles -}}
{{- $p := dict "schedulerName" .Values.schedulerName -}}
{{- if .Values.plugins }}{{ $_ := set $p "plugins" .Values.plugins }}{{ end -}}
{{- if .Values.pluginConfig }}{{ $_ := set $p "pluginConfig" .Values.pluginConfig }}{{ end -}}
{{- $profiles = list $p -}}
{{- end -}}
{{- $tls := dict -}}
{{- if (include "berth.tls" .) -}}
{{- $tls = dict "certFile" (printf "%s/tls.crt" $tlsDir) "keyFile" (printf "%s/tls.key" $tlsDir) -}}
{{- if (include "berth.mtls" .) }}{{ $_ := set $tls "clientCAFile" (printf "%s/ca.crt" $tlsDir) }}{{ end -}}
{{- end -}}
{{- $http := dict "host" "0.0.0.0" "port" (int .Values.http.port) "maxBodyBytes" (int64 .Values.http.maxBodyBytes) -}}
{{- $grpc := dict "host" "0.0.0.0" "port" (int .Values.grpc.port) "maxMessageBytes" (int64 .Values.grpc.maxMessageBytes) -}}
{{- if (include "berth.tls" .) }}{{ $_ := set $http "tls" $tls }}{{ $_ := set $grpc "tls" $tls }}{{ end -}}
{{- $auth := dict "allowUnauthenticatedMutations" .Values.grpc.auth.allowUnauthenticatedMutations -}}
{{- if .Values.grpc.auth.token }}{{ $_ := set $auth "tokenFile" (printf "%s/token" (include "berth.grpcTokenDir" .)) }}{{ end -}}
{{- if .Values.grpc.auth.impersonateCertificateCallers }}{{ $_ := set $auth "impersonateCertificateCallers" true }}{{ end -}}
{{- $_ := set $grpc "auth" $auth -}}
{{- /* Extender verbs: mTLS when clientAuth (then never open), else as http.auth says. */ -}}
{{- $mtls := include "berth.mtls" . -}}
{{- $_ := set $http "auth" (dict "allowUnauthenticated" (and (not $mtls) (ne .Values.role "scheduler") (dig "auth" "allowUnauthenticated" false .Values.http))) -}}
{{- /* The dashboard: TokenReview sign-in in Kubernetes mode; TLS without client certificates (browsers). */ -}}
{{- $uiValues := .Values.ui | default dict -}}
{{- $ui := dict "enabled" (dig "enabled" true $uiValues) "host" "0.0.0.0" "port" (int (dig "port" 8889 $uiValues)) "allowedHosts" (dig "allowedHosts" list $uiValues) -}}
{{- if (include "berth.tls" .) }}{{ $_ := set $ui "tls" (omit $tls "clientCAFile") }}{{ end -}}
{{- $isScheduler := eq .Values.role "scheduler" -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- $_ := set $cfg "apiVersion" "berth.dev/v1" -}}
{{- $_ := set $cfg "kind" "BerthConfiguration" -}}
{{- $_ := set $cfg "profiles" $profiles -}}
{{- $_ := set $cfg "runSchedulingLoop" $isScheduler -}}
{{- $_ := set $cfg "http" $http -}}
{{- $_ := set $cfg "grpc" $grpc -}}
{{- $_ := set $cfg "ui" $ui -}}
{{- /* The extender verbs only where kube-scheduler calls them (the extender
role): a second scheduler exposes none. */ -}}
{{- $_ := set $cfg "extender" (dict
      "enabled" (not $isScheduler)
      "urlPrefix" .Values.extender.urlPrefix
      "profile" (include "berth.extenderProfile" .)
      "managedResources" .Values.extender.managedResources
      "passThroughUnmanaged" .Values.extender.passThroughUnmanaged) -}}
{{- $_ := set $cfg "leaderElection" (dict
      "leaderElect" $isScheduler
      "leaseDurationSeconds" .Values.leaderElection.leaseDurationSeconds
      "renewDeadlineSeconds" .Values.leaderElection.renewDeadlineSeconds
      "retryPeriodSeconds" .Values.leaderElection.retryPeriodSeconds
      "resourceName" (include "berth.leaseName" .)
      "resourceNamespace" .Release.Namespace) -}}
{{- toYaml $cfg }}
{{- end }}

{{/* Where the BerthConfiguration ConfigMap is mounted (a directory of its own). */}}
{{- define "berth.configDir" -}}/etc/berth/config{{- end }}

{{/*
The checksum that rolls Berth's pods: the configuration without `queues`,
which a running Berth re-reads from the mounted file (berth/reload.py).
*/}}
{{- define "berth.configChecksum" -}}
{{- $cfg := include "berth.config" . | fromYaml -}}
{{- $_ := unset $cfg "queues" -}}
{{- toYaml $cfg | sha256sum }}
{{- end }}

{{/* The extender role's KubeSchedulerConfiguration. */}}
{{- define "berth.kubeSchedulerConfig" -}}
{{- $ks := .Values.kubeScheduler -}}
{{- $profile := dict "schedulerName" $ks.profileName -}}
{{- if $ks.plugins }}{{ $_ := set $profile "plugins" $ks.plugins }}{{ end -}}
{{- if $ks.pluginConfig }}{{ $_ := set $profile "pluginConfig" $ks.pluginConfig }}{{ end -}}
{{- $ext := dict
      "urlPrefix" (include "berth.extenderURL" .)
      "filterVerb" "filter"
      "prioritizeVerb" "prioritize"
      "weight" (int .Values.extender.weight)
      "enableHTTPS" (eq (include "berth.tls" .) "true")
      "nodeCacheCapable" .Values.extender.nodeCacheCapable
      "ignorable" .Values.extender.ignorable
      "httpTimeout" .Values.extender.httpTimeout -}}
{{- if .Values.extender.preempt }}{{ $_ := set $ext "preemptVerb" "preempt" }}{{ end -}}
{{- if .Values.extender.bind }}{{ $_ := set $ext "bindVerb" "bind" }}{{ end -}}
{{- if .Values.extender.managedResources -}}
{{- $managed := list -}}
{{- range .Values.extender.managedResources }}{{ $managed = append $managed (dict "name" . "ignoredByScheduler" true) }}{{ end -}}
{{- $_ := set $ext "managedResources" $managed -}}
{{- end -}}
{{- if (include "berth.tls" .) -}}
{{- $tlsCfg := dict "caFile" "/etc/kubernetes/berth-tls/ca.crt" -}}
{{- if (include "berth.mtls" .) -}}
{{- $_ := set $tlsCfg "certFile" "/etc/kubernetes/berth-tls/tls.crt" -}}
{{- $_ := set $tlsCfg "keyFile" "/etc/kubernetes/berth-tls/tls.key" -}}
{{- end -}}
{{- $_ := set $ext "tlsConfig" $tlsCfg -}}
{{- end -}}
{{- $cfg := dict
      "apiVersion" "kubescheduler.config.k8s.io/v1"
      "kind" "KubeSchedulerConfiguration"
      "leaderElection" (dict
        "leaderElect" true
        "resourceLock" "leases"
        "resourceName" (include "berth.kubeScheduler.leaseName" .)
        "resourceNamespace" .Release.Namespace
        "leaseDuration" $ks.leaderElection.leaseDuration
        "renewDeadline" $ks.leaderElection.renewDeadline
        "retryPeriod" $ks.leaderElection.retryPeriod)
      "profiles" (list $profile)
      "extenders" (list $ext) -}}
{{- toYaml $cfg }}
{{- end }}

{{/* A probe on Berth's HTTP port. With mTLS the kubelet cannot present a
client certificate, so the probe runs inside the container with the pod's own
certificate (python is the image's interpreter). */}}
{{- define "berth.probe" -}}
{{- $root := .root -}}
{{- if include "berth.mtls" $root -}}
{{- $dir := include "berth.tlsDir" $root -}}
exec:
  command:
    - python
    - -c
    - >-
      import ssl, urllib.request;
      c = ssl.create_default_context(cafile="{{ $dir }}/ca.crt");
      c.check_hostname = False;
      c.load_cert_chain("{{ $dir }}/tls.crt", "{{ $dir }}/tls.key");
      urllib.request.urlopen("https://127.0.0.1:{{ int $root.Values.http.port }}{{ .path }}", context=c, timeout={{ .probe.timeoutSeconds }})
{{- else -}}
httpGet:
  path: {{ .path }}
  port: http
  scheme: {{ ternary "HTTPS" "HTTP" (eq (include "berth.tls" $root) "true") }}
{{- end }}
{{ toYaml .probe }}
{{- end }}

{{/* Rules across values that values.schema.json cannot say clearly. */}}
{{- define "berth.validate" -}}
{{- if and (eq (toString .Values.tls.clientAuth) "true") (not (include "berth.tls" .)) }}
{{- fail "tls.clientAuth: true needs tls.enabled: true" }}
{{- end }}
{{- if and (eq (toString .Values.tls.certManager.enabled) "true") (not (include "berth.tls" .)) }}
{{- fail "tls.certManager.enabled: true needs tls.enabled: true" }}
{{- end }}
{{- if not (or .Values.grpc.auth.token (include "berth.mtls" .) .Values.grpc.auth.allowUnauthenticatedMutations) }}
{{- fail "grpc.auth: Berth listens on 0.0.0.0 and refuses to start without authentication of mutating RPCs: keep grpc.auth.token: true, set tls.clientAuth: true, or set grpc.auth.allowUnauthenticatedMutations: true" }}
{{- end }}
{{- if eq (int .Values.http.port) (int .Values.grpc.port) }}
{{- fail (printf "http.port and grpc.port must differ (both %d)" (int .Values.http.port)) }}
{{- end }}
{{- $le := .Values.leaderElection }}
{{- if not (and (gt (float64 $le.leaseDurationSeconds) (float64 $le.renewDeadlineSeconds)) (gt (float64 $le.renewDeadlineSeconds) (float64 $le.retryPeriodSeconds))) }}
{{- fail (printf "leaderElection: need leaseDurationSeconds (%v) > renewDeadlineSeconds (%v) > retryPeriodSeconds (%v)" $le.leaseDurationSeconds $le.renewDeadlineSeconds $le.retryPeriodSeconds) }}
{{- end }}
{{- $queues := dict }}
{{- range $i, $q := (.Values.config | default dict).queues | default list }}
{{- if hasKey $queues $q.name }}
{{- fail (printf "config.queues[%d].name: duplicate queue %q (also config.queues[%d])" $i $q.name (get $queues $q.name)) }}
{{- end }}
{{- $_ := set $queues $q.name $i }}
{{- end }}
{{- range $i, $q := (.Values.config | default dict).queues | default list }}
{{- if and $q.parent (not (hasKey $queues $q.parent)) }}
{{- fail (printf "config.queues[%d].parent: no queue named %q" $i $q.parent) }}
{{- end }}
{{- end }}
{{- if and .Values.profiles (not .Values.extender.profile) }}
{{- $names := list }}
{{- range .Values.profiles }}{{ $names = append $names (.schedulerName | default "berth") }}{{ end }}
{{- if not (has .Values.schedulerName $names) }}
{{- fail (printf "extender.profile: set it to one of the profiles %v (schedulerName %q is not among them)" $names .Values.schedulerName) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The leader-only Services' selector: in the scheduler role, the Pod the
Lease holder labels berth.dev/leader: "true" (templates/leader.yaml). */}}
{{- define "berth.leaderSelectorLabels" -}}
{{ include "berth.selectorLabels" . }}
{{- if eq .Values.role "scheduler" }}
berth.dev/leader: "true"
{{- end }}
{{- end }}

{{/* TLS on ("true") or off (""): tls.enabled, or by default the extender
role's (kube-scheduler calls the verbs over mTLS). */}}
{{- define "berth.tls" -}}
{{- if kindIs "bool" .Values.tls.enabled }}{{ if .Values.tls.enabled }}true{{ end }}
{{- else if eq .Values.role "extender" }}true{{ end -}}
{{- end }}

{{/* mTLS on ("true") or off (""): tls.clientAuth, by default with the default TLS. */}}
{{- define "berth.mtls" -}}
{{- if include "berth.tls" . }}
{{- if kindIs "bool" .Values.tls.clientAuth }}{{ if .Values.tls.clientAuth }}true{{ end }}
{{- else if not (kindIs "bool" .Values.tls.enabled) }}true{{ end }}
{{- end -}}
{{- end }}

{{/* cert-manager issues the TLS Secret ("true") or not (""): with TLS on and
no tls.secretName, tls.certManager.enabled, by default whether the cluster
serves cert-manager.io/v1 (otherwise the chart generates the Secret). */}}
{{- define "berth.certManager" -}}
{{- if include "berth.tls" . }}
{{- if kindIs "bool" .Values.tls.certManager.enabled }}{{ if .Values.tls.certManager.enabled }}true{{ end }}
{{- else if and (not .Values.tls.secretName) (.Capabilities.APIVersions.Has "cert-manager.io/v1") }}true{{ end }}
{{- end -}}
{{- end }}
