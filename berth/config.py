"""BerthConfiguration: one YAML document, modelled on KubeSchedulerConfiguration.

::

    apiVersion: berth.dev/v1
    kind: BerthConfiguration
    percentageOfNodesToScore: 0          # 0 = kube-scheduler's adaptive default
    podInitialBackoffSeconds: 1
    podMaxBackoffSeconds: 10
    podMaxInUnschedulablePodsSeconds: 300
    profiles:
    - schedulerName: berth
      plugins:
        multiPoint: {enabled: [{name: Coscheduling}], disabled: [{name: ImageLocality}]}
        score: {enabled: [{name: NodeResourcesFit, weight: 2}]}
      pluginConfig:
      - name: NodeResourcesFit
        args: {scoringStrategy: {type: MostAllocated}}

Every key is checked: an unknown field, a wrong type, an unknown plugin or an
invalid argument stops start-up with :class:`ConfigError`, whose message
names the offending field path (``profiles[0].pluginConfig[1].args...``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec
import yaml

from berth import features
from berth.errors import InvalidArgument
from berth.framework import registry
from berth.framework.profile import DEFAULT_SCHEDULER_NAME, PluginConfig, PluginRef, Plugins, PluginSet, Profile
from berth.quota.spec import PreemptionSpec, QueueSpec, validate_queues

__all__ = [
    "API_VERSION",
    "DEFAULT_HOST",
    "KIND",
    "BerthConfiguration",
    "ConfigError",
    "ExtenderConfig",
    "GrpcAuthConfig",
    "GrpcConfig",
    "HttpConfig",
    "LeaderElectionConfig",
    "PluginConfig",
    "PluginRef",
    "PluginSet",
    "Plugins",
    "PreemptionSpec",
    "Profile",
    "QueueSpec",
    "TLSConfig",
    "load",
    "parse",
]

log = logging.getLogger(__name__)

API_VERSION = "berth.dev/v1"
KIND = "BerthConfiguration"


class ConfigError(ValueError):
    """An invalid configuration; the message names the field path."""


class _Cfg(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class TLSConfig(_Cfg):
    cert_file: str
    key_file: str
    #: When set, clients must present a certificate signed by this CA (mTLS).
    client_ca_file: str | None = msgspec.field(default=None, name="clientCAFile")


#: Where ``berth serve`` listens unless told otherwise: loopback only. The
#: Helm chart sets 0.0.0.0 (and turns on authentication of mutating RPCs).
DEFAULT_HOST = "127.0.0.1"


class HttpConfig(_Cfg):
    host: str = DEFAULT_HOST
    port: int = 8888
    tls: TLSConfig | None = None
    #: Requests bigger than this get 413 (measured after inflating a
    #: gzip/deflate body). The default holds 15000 full nodes.
    max_body_bytes: int = 256 * 1024 * 1024
    #: A keep-alive connection with no request for this long is closed
    #: (Go's http.Server IdleTimeout).
    idle_timeout_seconds: float = 60.0
    #: The request line and headers must arrive within this (ReadHeaderTimeout).
    read_header_timeout_seconds: float = 10.0
    #: The whole body must arrive within this (ReadTimeout).
    read_timeout_seconds: float = 60.0


class GrpcAuthConfig(_Cfg):
    """Who may call which RPCs.

    A client is authenticated by a client certificate (``grpc.tls.clientCAFile``),
    by ``authorization: Bearer <token>`` metadata matching the token in
    ``tokenFile`` (compared in constant time), or — in Kubernetes mode — by a
    Kubernetes bearer token the API server accepts (TokenReview). Mutating
    RPCs (the Cluster feed, Submit, Cancel, Bind) always need one where any
    is configured; in Kubernetes mode Submit and Cancel write as the caller.
    Reads follow ``reads``.
    """

    #: A file holding the bearer token (e.g. a mounted Secret); surrounding
    #: whitespace is ignored.
    token_file: str | None = None
    #: Without a token or client CA, a server listening beyond loopback
    #: refuses to start unless this says unauthenticated mutations are wanted.
    allow_unauthenticated_mutations: bool = False
    #: Read-only RPCs (ListPods, Why, WatchDecisions, ListQueues, WhatIf, ...):
    #: ``auto`` — in Kubernetes mode authenticated and filtered by the
    #: caller's RBAC (a caller sees the pods of the namespaces where it may
    #: ``list pods``; nodes need ``list nodes``; queues ``list
    #: queues.berth.dev``), open otherwise; ``required`` — authenticated
    #: everywhere (standalone: the token file or a client certificate);
    #: ``open`` — nobody is asked (logged as a warning in Kubernetes mode).
    reads: Literal["auto", "open", "required"] = "auto"


class GrpcConfig(_Cfg):
    host: str = DEFAULT_HOST
    port: int = 50051
    tls: TLSConfig | None = None
    #: Largest request or response message, measured after decompression.
    max_message_bytes: int = 64 * 1024 * 1024
    #: A connection with no call in flight for this long is closed with a
    #: GOAWAY (grpc's max_connection_idle; open Watch streams keep theirs).
    idle_timeout_seconds: float = 300.0
    auth: GrpcAuthConfig = msgspec.field(default_factory=GrpcAuthConfig)


class ExtenderConfig(_Cfg):
    """How Berth answers kube-scheduler's extender calls."""

    url_prefix: str = "/scheduler"
    #: The Berth profile that judges pods arriving over the extender.
    profile: str = DEFAULT_SCHEDULER_NAME
    #: Extended resources Berth accounts for on kube-scheduler's behalf
    #: (kube-scheduler's managedResources with ignoredByScheduler: true).
    managed_resources: list[str] = []
    #: Pods requesting none of managed_resources pass every node untouched.
    pass_through_unmanaged: bool = False


class LeaderElectionConfig(_Cfg):
    leader_elect: bool = True
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0
    resource_name: str = "berth"
    resource_namespace: str = "kube-system"


class BerthConfiguration(_Cfg):
    api_version: str = API_VERSION
    kind: str = KIND
    profiles: list[Profile] = msgspec.field(default_factory=lambda: [Profile()])
    #: False for a pure extender: Berth then answers kube-scheduler's calls
    #: and gRPC reads but never schedules pods itself.
    run_scheduling_loop: bool = True
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    pod_max_in_unschedulable_pods_seconds: float = 300.0
    #: An assumed pod whose bind returned but never confirmed is released
    #: after this long; 0 (the default): never, as kube-scheduler, whose
    #: cache no longer expires assumed pods (``durationToExpireAssumedPod``
    #: was 0 from v1.29, kubernetes#106361, and the TTL is gone from
    #: pkg/scheduler/backend/cache in v1.37.2): a pod's confirming Add may be
    #: late (a watch being re-established) but is never optional, and
    #: releasing its room meanwhile would over-commit the node.
    assumed_pod_ttl_seconds: float = msgspec.field(default=0.0, name="assumedPodTTLSeconds")
    #: Deprecated: Coscheduling's ``scheduleTimeoutSeconds`` argument. When
    #: set, it becomes that argument in every profile that does not set it.
    gang_schedule_timeout_seconds: float | None = None
    http: HttpConfig = msgspec.field(default_factory=HttpConfig)
    grpc: GrpcConfig = msgspec.field(default_factory=GrpcConfig)
    extender: ExtenderConfig = msgspec.field(default_factory=ExtenderConfig)
    leader_election: LeaderElectionConfig = msgspec.field(default_factory=LeaderElectionConfig)
    #: On SIGTERM both servers stop accepting, finish what is in flight for
    #: at most this long, then close what is left.
    shutdown_grace_period_seconds: float = 10.0
    #: Batch queues (:mod:`berth.quota`): hierarchical quotas, borrowing,
    #: fair share and reclaim. Empty: Berth schedules as without queues.
    #: The only part of the file a running Berth re-reads (on change, SIGHUP).
    queues: list[QueueSpec] = []
    #: The Kubernetes release whose scheduler Berth follows (``1.35``,
    #: ``1.36``, ``1.37``) where no API server says it: embedded and gRPC-fed
    #: modes. None: the newest. In Kubernetes mode the API server's version
    #: wins and a different value here is logged as ignored.
    kubernetes_version: str | None = None
    #: kube-scheduler's ``--feature-gates``: gate name -> on/off over the
    #: release's defaults (berth/features).
    feature_gates: dict[str, bool] = {}

    def profile(self, scheduler_name: str) -> Profile | None:
        return next((p for p in self.profiles if p.scheduler_name == scheduler_name), None)

    def features(self, cluster_version: features.KubeVersion | None = None) -> features.Features:
        """The gates Berth follows: ``cluster_version`` (the API server's)
        or ``kubernetesVersion`` or the newest release, with ``featureGates``."""
        version = cluster_version
        if version is None and self.kubernetes_version is not None:
            try:
                version = features.parse_version(self.kubernetes_version)
            except features.FeatureGateError as e:
                raise ConfigError(f"kubernetesVersion: {e}") from None
        try:
            return features.Features.of(version or features.NEWEST, self.feature_gates)
        except features.FeatureGateError as e:
            raise ConfigError(f"featureGates: {e}") from None


_PATH_RE = re.compile(r"\$((?:\.[A-Za-z0-9_]+|\[\d+\])*)")


def _msgspec_error(err: msgspec.ValidationError) -> ConfigError:
    """msgspec says ``... - at `$.profiles[0].plugins```; we say the path first."""
    text = str(err)
    msg, _, where = text.partition(" - at `")
    path = where.rstrip("`").removeprefix("$").removeprefix(".") if where else ""
    if msg.startswith("Object contains unknown field"):
        field = msg.split("`")[1] if "`" in msg else ""
        full = f"{path}.{field}" if path else field
        return ConfigError(f"{full}: unknown field")
    return ConfigError(f"{path or '(root)'}: {msg}")


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def parse(doc: Mapping[str, Any] | None) -> BerthConfiguration:
    """Decode and validate one configuration document; raises ConfigError."""
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise ConfigError(f"(root): expected a mapping, got {type(doc).__name__}")
    try:
        cfg = msgspec.convert(dict(doc), BerthConfiguration)
    except msgspec.ValidationError as e:
        raise _msgspec_error(e) from None
    _apply_deprecated(cfg)
    validate(cfg)
    return cfg


def _apply_deprecated(cfg: BerthConfiguration) -> None:
    """gangScheduleTimeoutSeconds (v0.1) became Coscheduling's own argument."""
    timeout = cfg.gang_schedule_timeout_seconds
    if timeout is None:
        return
    log.warning(
        "gangScheduleTimeoutSeconds is deprecated: set Coscheduling's pluginConfig args "
        "{scheduleTimeoutSeconds: %g} instead",
        timeout,
    )
    if timeout <= 0:
        raise ConfigError("gangScheduleTimeoutSeconds: must be greater than 0")
    for prof in cfg.profiles:
        pc = next((c for c in prof.plugin_config if c.name == "Coscheduling"), None)
        if pc is None:
            prof.plugin_config.append(PluginConfig(name="Coscheduling", args={"scheduleTimeoutSeconds": timeout}))
        else:
            pc.args = {"scheduleTimeoutSeconds": timeout, **pc.args}


def validate(cfg: BerthConfiguration) -> None:
    if cfg.api_version != API_VERSION:
        raise ConfigError(f"apiVersion: must be {API_VERSION!r}, got {cfg.api_version!r}")
    if cfg.kind != KIND:
        raise ConfigError(f"kind: must be {KIND!r}, got {cfg.kind!r}")
    if not 0 <= cfg.percentage_of_nodes_to_score <= 100:
        raise ConfigError("percentageOfNodesToScore: must be between 0 and 100")
    if cfg.pod_initial_backoff_seconds <= 0:
        raise ConfigError("podInitialBackoffSeconds: must be greater than 0")
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        raise ConfigError("podMaxBackoffSeconds: must be at least podInitialBackoffSeconds")
    if cfg.pod_max_in_unschedulable_pods_seconds <= 0:
        raise ConfigError("podMaxInUnschedulablePodsSeconds: must be greater than 0")
    if cfg.assumed_pod_ttl_seconds < 0:
        raise ConfigError("assumedPodTTLSeconds: must be 0 (never expire) or more")
    for name, port in (("http.port", cfg.http.port), ("grpc.port", cfg.grpc.port)):
        if not 0 <= port <= 65535:
            raise ConfigError(f"{name}: {port} is not a valid port")
    if cfg.http.max_body_bytes <= 0:
        raise ConfigError("http.maxBodyBytes: must be greater than 0")
    if cfg.grpc.max_message_bytes <= 0:
        raise ConfigError("grpc.maxMessageBytes: must be greater than 0")
    for name, seconds in (
        ("http.idleTimeoutSeconds", cfg.http.idle_timeout_seconds),
        ("http.readHeaderTimeoutSeconds", cfg.http.read_header_timeout_seconds),
        ("http.readTimeoutSeconds", cfg.http.read_timeout_seconds),
        ("grpc.idleTimeoutSeconds", cfg.grpc.idle_timeout_seconds),
    ):
        if not seconds > 0:
            raise ConfigError(f"{name}: must be greater than 0")
    if not cfg.shutdown_grace_period_seconds >= 0:
        raise ConfigError("shutdownGracePeriodSeconds: must not be negative")
    le = cfg.leader_election
    if le.leader_elect:
        # component-base's leader election validation (and the library's).
        if le.retry_period_seconds < 1:
            raise ConfigError("leaderElection.retryPeriodSeconds: must be at least 1")
        if le.renew_deadline_seconds <= 1.2 * le.retry_period_seconds:
            raise ConfigError("leaderElection.renewDeadlineSeconds: must be greater than 1.2 x retryPeriodSeconds")
        if le.lease_duration_seconds <= le.renew_deadline_seconds:
            raise ConfigError("leaderElection.leaseDurationSeconds: must be greater than renewDeadlineSeconds")
    if not cfg.extender.url_prefix.startswith("/"):
        raise ConfigError("extender.urlPrefix: must start with '/'")
    if not cfg.profiles:
        raise ConfigError("profiles: at least one profile is required")
    seen: set[str] = set()
    for i, prof in enumerate(cfg.profiles):
        path = f"profiles[{i}]"
        if not prof.scheduler_name or not _DNS_LABEL.match(prof.scheduler_name):
            raise ConfigError(f"{path}.schedulerName: {prof.scheduler_name!r} is not a valid name")
        if prof.scheduler_name in seen:
            raise ConfigError(f"{path}.schedulerName: duplicate profile {prof.scheduler_name!r}")
        seen.add(prof.scheduler_name)
        if prof.percentage_of_nodes_to_score is not None and not 0 <= prof.percentage_of_nodes_to_score <= 100:
            raise ConfigError(f"{path}.percentageOfNodesToScore: must be between 0 and 100")
        if prof.randomize_top_n < 0:
            raise ConfigError(f"{path}.randomizeTopN: must not be negative")
    feats = cfg.features()
    for i, prof in enumerate(cfg.profiles):
        try:
            registry.resolve_profile(prof, feats)
        except registry.RegistryError as e:
            raise ConfigError(f"profiles[{i}].{e}") from None
    if cfg.profile(cfg.extender.profile) is None:
        raise ConfigError(f"extender.profile: no profile named {cfg.extender.profile!r}")
    try:
        validate_queues(cfg.queues)
    except InvalidArgument as e:
        raise ConfigError(str(e)) from None
    queue_sorts = {tuple(registry.resolve_profile(p, feats).queue_sort) for p in cfg.profiles}
    if len(queue_sorts) > 1:
        raise ConfigError("profiles: every profile must use the same queueSort plugin")


def load(path: str | Path | None) -> BerthConfiguration:
    """Read a configuration file (None: the defaults)."""
    if path is None:
        return parse({})
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"{p}: {e.strerror}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {_yaml_problem(e)}") from None
    if len(docs) > 1:
        raise ConfigError(f"{p}: expected one BerthConfiguration document, found {len(docs)}")
    try:
        return parse(docs[0] if docs else {})
    except ConfigError as e:
        raise ConfigError(f"{p}: {e}") from None


def _yaml_problem(e: yaml.YAMLError) -> str:
    """PyYAML's error in one line (its ``str`` spans five, quoting the source
    with a caret): ``line 2, column 4: expected ',' or ']', but got ':'
    (while parsing a flow sequence at line 1, column 9)``."""
    if not isinstance(e, yaml.MarkedYAMLError) or e.problem_mark is None:
        return " ".join(str(e).split())
    mark = e.problem_mark
    out = f"line {mark.line + 1}, column {mark.column + 1}: {e.problem}"
    if e.context:
        where = e.context_mark
        out += f" ({e.context} at line {where.line + 1}, column {where.column + 1})" if where else f" ({e.context})"
    return out


def to_yaml(cfg: BerthConfiguration) -> str:
    """The effective configuration, as logged at start."""
    return yaml.safe_dump(msgspec.to_builtins(cfg), sort_keys=False)
