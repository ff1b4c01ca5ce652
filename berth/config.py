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

from berth import features, gangs
from berth.errors import InvalidArgument
from berth.framework import registry
from berth.framework.profile import DEFAULT_SCHEDULER_NAME, PluginConfig, PluginRef, Plugins, PluginSet, Profile
from berth.gangs import topology
from berth.quota import naming
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
    "HttpAuthConfig",
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
    "UiAuthConfig",
    "UiConfig",
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


class HttpAuthConfig(_Cfg):
    """Who may call the extender verbs (``filter``, ``prioritize``,
    ``preempt``, ``bind``); health, readiness and metrics stay open.

    A caller is authenticated by a client certificate signed by
    ``http.tls.clientCAFile`` (kube-scheduler's extender ``tlsConfig``
    presents one; it sends no bearer token) or by ``Authorization: Bearer
    <token>`` matching the token in ``tokenFile`` (compared in constant time).
    On loopback with neither, the verbs stay open.
    """

    #: A file holding the bearer token other callers send (e.g. a mounted
    #: Secret); surrounding whitespace is ignored.
    token_file: str | None = None
    #: Without a token file or client CA, a server listening beyond loopback
    #: refuses to start unless this says unauthenticated callers are wanted
    #: (then it logs a warning).
    allow_unauthenticated: bool = False


class HttpConfig(_Cfg):
    """The extender, health, readiness and metrics port."""

    #: The address to listen on; 0.0.0.0 for every interface (then TLS or
    #: ``auth`` is required).
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
    #: The longest one request may take, body included (kube-apiserver's
    #: ``--request-timeout``, 1m): past it its work stops and the answer is
    #: 504. A caller that goes away stops its request too; a ``bind`` is
    #: finished all the same.
    request_timeout_seconds: float = 60.0
    #: Who may call the extender verbs (filter, prioritize, preempt, bind).
    auth: HttpAuthConfig = msgspec.field(default_factory=HttpAuthConfig)


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
    #: Kubernetes mode: a caller authenticated by its client certificate
    #: (CN the user, each O a group) may Submit and Cancel, Berth writing
    #: as it with Impersonate-User/-Group headers (kubectl --as, as
    #: kube-rbac-proxy does); Berth's ServiceAccount then needs to
    #: impersonate users and groups (the chart grants it only when this is
    #: true: from Kubernetes 1.36 constrained to creating and deleting pods
    #: and PodGroups). False: such callers read but cannot write.
    impersonate_certificate_callers: bool = False


class GrpcConfig(_Cfg):
    """The gRPC API (``berth.v1.Scheduler``, ``berth.v1.Cluster``, health,
    reflection) the CLI and batch systems use."""

    #: The address to listen on; 0.0.0.0 for every interface.
    host: str = DEFAULT_HOST
    port: int = 50051
    tls: TLSConfig | None = None
    #: Largest request or response message, measured after decompression.
    max_message_bytes: int = 64 * 1024 * 1024
    #: A connection with no call in flight for this long is closed with a
    #: GOAWAY (grpc's max_connection_idle; open Watch streams keep theirs).
    idle_timeout_seconds: float = 300.0
    #: The longest one unary call may run (kube-apiserver's
    #: ``--request-timeout``, 1m): past it the call ends
    #: ``DEADLINE_EXCEEDED`` and its work stops; a client's shorter deadline
    #: wins. Streams (WatchDecisions) are not bounded.
    request_timeout_seconds: float = 60.0
    auth: GrpcAuthConfig = msgspec.field(default_factory=GrpcAuthConfig)


class FairnessLevelConfig(_Cfg):
    """One priority level (berth/scheduling/fairness.py): APF's
    ``nominalConcurrencyShares`` and ``queueLengthLimit``, per caller."""

    #: Requests of this level executing at once, every caller together.
    concurrency: int
    #: Requests of one caller (user, else address) executing at once.
    per_caller: int
    #: Requests of one caller waiting; one more is RESOURCE_EXHAUSTED / 429
    #: (APF's default queueLengthLimit).
    queue_length: int = 50


class FairnessConfig(_Cfg):
    """Fairness between callers of the gRPC reads and feeds and the
    dashboard's reads; the extender's verbs and the scheduling loop are
    never queued."""

    reads: FairnessLevelConfig = msgspec.field(default_factory=lambda: FairnessLevelConfig(concurrency=8, per_caller=2))
    feeds: FairnessLevelConfig = msgspec.field(default_factory=lambda: FairnessLevelConfig(concurrency=2, per_caller=1))


class UiRequestHeaderConfig(_Cfg):
    """The dashboard behind an authenticating proxy, as kube-apiserver's
    ``--requestheader-*`` flags: a request whose TLS client certificate was
    signed by ``clientCAFile`` (with a common name in ``allowedNames``, when
    any) is the user its headers name; anyone else's headers are ignored."""

    #: The CA that signs the proxy's client certificate (needs ``ui.tls``).
    client_ca_file: str = msgspec.field(name="clientCAFile")
    #: Common names the proxy's certificate may have; empty: any the CA signed.
    allowed_names: list[str] = []
    #: Headers naming the user, the first non-empty one counts.
    username_headers: list[str] = msgspec.field(default_factory=lambda: ["X-Remote-User"])
    #: Headers naming the user's uid, the first non-empty one counts.
    uid_headers: list[str] = []
    #: Headers naming the user's groups, every value of each counts.
    group_headers: list[str] = msgspec.field(default_factory=lambda: ["X-Remote-Group"])
    #: Header prefixes of the user's extra fields (``X-Remote-Extra-Scopes: a``).
    extra_header_prefixes: list[str] = msgspec.field(default_factory=lambda: ["X-Remote-Extra-"])


class UiAuthConfig(_Cfg):
    """How the dashboard signs people in outside Kubernetes (in Kubernetes
    mode a Kubernetes bearer token is checked with a TokenReview)."""

    #: A file holding a static token the sign-in form (or an
    #: ``Authorization: Bearer`` header) must present; its holder sees
    #: everything. Surrounding whitespace is ignored.
    token_file: str | None = None
    #: Trust an authenticating proxy's user headers (UiRequestHeaderConfig);
    #: the user is then authorised as a signed-in one is.
    request_header: UiRequestHeaderConfig | None = None


class UiConfig(_Cfg):
    """The read-only dashboard: a listener of its own, apart from the
    extender's port that kube-scheduler must reach."""

    #: False: no dashboard listener at all.
    enabled: bool = True
    #: Where it listens: loopback unless told (the Helm chart sets 0.0.0.0,
    #: where Kubernetes tokens sign in).
    host: str = DEFAULT_HOST
    #: Its port (``berth serve --ui-port``); never the extender's.
    port: int = 8889
    #: HTTPS for the dashboard (the session cookie is then ``Secure``); with
    #: ``clientCAFile`` a client must also present a certificate of that CA.
    tls: TLSConfig | None = None
    #: Host header names (without port) the dashboard answers; any other is
    #: refused with 403 (DNS rebinding). Each entry is a name or IP literal
    #: (IPv6 in brackets), or ``*.example.com`` for any name under it. Empty:
    #: localhost, 127.0.0.1, [::1] and ``ui.host``, with any port (kubectl
    #: proxy's ``--accept-hosts`` default).
    allowed_hosts: list[str] = []
    #: The longest one request may take (as ``http.requestTimeoutSeconds``);
    #: the decision stream is not bounded.
    request_timeout_seconds: float = 60.0
    auth: UiAuthConfig = msgspec.field(default_factory=UiAuthConfig)
    #: Outside Kubernetes, a dashboard listening beyond loopback without
    #: ``auth.tokenFile`` refuses to start unless this says it may be open
    #: (then it logs a warning).
    allow_unauthenticated: bool = False


class ExtenderConfig(_Cfg):
    """How Berth answers kube-scheduler's extender calls."""

    #: false: the verbs (filter, prioritize, preempt, bind) are not served at
    #: all — Berth as a second scheduler needs none, and a verb nobody can
    #: call needs no credential; the HTTP port keeps health, readiness and
    #: metrics.
    enabled: bool = True
    url_prefix: str = "/scheduler"
    #: The Berth profile that judges pods arriving over the extender.
    profile: str = DEFAULT_SCHEDULER_NAME
    #: Extended resources Berth accounts for on kube-scheduler's behalf
    #: (kube-scheduler's managedResources with ignoredByScheduler: true).
    managed_resources: list[str] = []
    #: Pods requesting none of managed_resources pass every node untouched.
    pass_through_unmanaged: bool = False


class LeaderElectionConfig(_Cfg):
    """Kubernetes mode: one replica schedules, holding a Lease
    (kube-scheduler's ``leaderElection``, with its defaults)."""

    leader_elect: bool = True
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0
    resource_name: str = "berth"
    resource_namespace: str = "kube-system"


class StateDecisionsConfig(_Cfg):
    """How much of the decision log the store keeps (``WatchDecisions``
    resumes from any serial still kept; older ones answer OUT_OF_RANGE)."""

    max_entries: int = 100_000
    max_bytes: int = 64 << 20


class StateConfig(_Cfg):
    """Where standalone Berth keeps its state (:mod:`berth.store`). Unset
    ``backend``: ``sqlite`` for ``berth serve`` without ``--cluster``,
    ``memory`` with it (the demo) and in tests; Kubernetes mode keeps none
    (the API server is its store)."""

    backend: Literal["memory", "sqlite", "postgres"] | None = None
    #: The sqlite store's directory; empty: ``$XDG_STATE_HOME/berth``
    #: (``~/.local/state/berth``). ``berth serve --state-dir`` sets it.
    dir: str = ""
    #: The postgres store's server (a libpq URI, ``postgresql://user@host/db``),
    #: or the file holding it (``dsnFile``, read at start: keeps a password
    #: out of the configuration); exactly one with ``backend: postgres``.
    #: Several replicas may share it: one leads (``leaderElection``'s
    #: lease, renew deadline and retry period), the others stand by.
    dsn: str = ""
    dsn_file: str = ""
    decisions: StateDecisionsConfig = msgspec.field(default_factory=StateDecisionsConfig)


class BerthConfiguration(_Cfg):
    api_version: str = API_VERSION
    kind: str = KIND
    profiles: list[Profile] = msgspec.field(default_factory=lambda: [Profile()])
    #: False for a pure extender: Berth then answers kube-scheduler's calls
    #: and gRPC reads but never schedules pods itself.
    run_scheduling_loop: bool = True
    #: How many feasible nodes to find before scoring, as a percentage of
    #: all nodes (kube-scheduler's); 0: its adaptive default, 50% less 1% per
    #: 125 nodes, at least 5% and never fewer than 100 nodes.
    percentage_of_nodes_to_score: int = 0
    #: A pod that failed waits this long before its next attempt, doubling
    #: per failure up to podMaxBackoffSeconds (kube-scheduler's backoffQ).
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    #: An unschedulable pod no event has woken is retried after this long.
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
    #: Per-caller concurrency and queues for reads and feeds (berth/scheduling/fairness.py).
    fairness: FairnessConfig = msgspec.field(default_factory=FairnessConfig)
    #: The dashboard's own listener (berth/adapters/http/ui.py).
    ui: UiConfig = msgspec.field(default_factory=UiConfig)
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
    #: The gang dialects Berth reads (:mod:`berth.gangs.sources`): every one
    #: by default. A pod two enabled dialects claim waits, refused.
    gang_sources: list[str] = msgspec.field(default_factory=lambda: list(gangs.SOURCES))
    #: Label-or-annotation keys a pod names its batch queue with, consulted
    #: in order (:mod:`berth.quota.naming`); re-read with ``queues``.
    queue_keys: list[str] = msgspec.field(default_factory=lambda: list(naming.DEFAULT_QUEUE_KEYS))
    #: A framework's queue name -> the Berth queue it means (YuniKorn's
    #: ``root.sandbox`` -> ``sandbox``); re-read with ``queues``.
    queue_aliases: dict[str, str] = {}
    #: Standalone Berth's state store (:class:`StateConfig`).
    state: StateConfig = msgspec.field(default_factory=StateConfig)
    #: Topologies gangs may ask to be placed within (:mod:`berth.gangs.topology`,
    #: Kueue's Topology: ``levels`` of node labels, widest first). Non-empty:
    #: the TopologyGang plugin runs in every profile by default.
    topologies: list[topology.TopologySpec] = []
    #: One topology without a name, ``topology: {levels: [...]}`` (docs/topology.md):
    #: added to ``topologies`` as ``default`` when the configuration is read.
    topology: topology.UnnamedTopologySpec | None = None
    #: Also read Kueue ``Topology`` objects (kueue.x-k8s.io v1beta2, else
    #: v1beta1) where the cluster serves them, and from the cluster file;
    #: TopologyGang then runs even with no ``topologies``.
    kueue_topologies: bool = False
    #: Also read Volcano ``HyperNode`` objects (topology.volcano.sh/v1alpha1)
    #: where the cluster serves them, and from the cluster file: their tiers
    #: become the topology ``volcano-hypernodes`` (docs/topology.md).
    volcano_hyper_nodes: bool = False

    def holds_reservations(self) -> bool:
        """Whether a configured queue sets ``reservation``: the Reservation
        plugin then runs in every profile by default (a queue given one
        later, or a Queue object's, needs it enabled in the profile or a restart)."""
        return any(q.reservation is not None for q in self.queues)

    def topology_aware(self) -> bool:
        """Whether TopologyGang runs in every profile by default."""
        return bool(self.topologies) or self.kueue_topologies or self.volcano_hyper_nodes

    def profile(self, scheduler_name: str) -> Profile | None:
        return next((p for p in self.profiles if p.scheduler_name == scheduler_name), None)

    def scheduler_names(self) -> dict[str, str]:
        """Every scheduler name Berth answers to -> its profile: each profile's
        ``schedulerName`` and its ``aliases``."""
        out: dict[str, str] = {}
        for p in self.profiles:
            for name in (p.scheduler_name, *p.aliases):
                out.setdefault(name, p.scheduler_name)
        return out

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
    if cfg.topology is not None:
        if any(t.name == "default" for t in cfg.topologies):
            raise ConfigError("topology: a topology named 'default' is already in topologies: keep one")
        cfg.topologies.append(cfg.topology.named())
        cfg.topology = None
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
    if cfg.state.backend == "postgres" and bool(cfg.state.dsn) == bool(cfg.state.dsn_file):
        raise ConfigError("state: backend postgres needs exactly one of dsn and dsnFile")
    if cfg.state.backend != "postgres" and (cfg.state.dsn or cfg.state.dsn_file):
        raise ConfigError("state.dsn/dsnFile: only for backend postgres")
    if cfg.state.decisions.max_entries < 1:
        raise ConfigError("state.decisions.maxEntries: must be at least 1")
    if cfg.state.decisions.max_bytes < 1024:
        raise ConfigError("state.decisions.maxBytes: must be at least 1024")
    for name, port in (("http.port", cfg.http.port), ("grpc.port", cfg.grpc.port), ("ui.port", cfg.ui.port)):
        if not 0 <= port <= 65535:
            raise ConfigError(f"{name}: {port} is not a valid port")
    if cfg.http.max_body_bytes <= 0:
        raise ConfigError("http.maxBodyBytes: must be greater than 0")
    for level_name, level in (("reads", cfg.fairness.reads), ("feeds", cfg.fairness.feeds)):
        for key, value in (
            ("concurrency", level.concurrency),
            ("perCaller", level.per_caller),
            ("queueLength", level.queue_length),
        ):
            if value < 1:
                raise ConfigError(f"fairness.{level_name}.{key}: must be at least 1, got {value}")
    if cfg.grpc.max_message_bytes <= 0:
        raise ConfigError("grpc.maxMessageBytes: must be greater than 0")
    for name, seconds in (
        ("http.idleTimeoutSeconds", cfg.http.idle_timeout_seconds),
        ("http.readHeaderTimeoutSeconds", cfg.http.read_header_timeout_seconds),
        ("http.readTimeoutSeconds", cfg.http.read_timeout_seconds),
        ("http.requestTimeoutSeconds", cfg.http.request_timeout_seconds),
        ("ui.requestTimeoutSeconds", cfg.ui.request_timeout_seconds),
        ("grpc.idleTimeoutSeconds", cfg.grpc.idle_timeout_seconds),
        ("grpc.requestTimeoutSeconds", cfg.grpc.request_timeout_seconds),
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
    _validate_aliases(cfg)
    try:
        gangs.validate_sources(cfg.gang_sources)
    except ValueError as e:
        raise ConfigError(f"gangSources{e}") from None
    try:
        naming.validate_keys(cfg.queue_keys)
    except ValueError as e:
        raise ConfigError(f"queueKeys{e}") from None
    for alias, target in cfg.queue_aliases.items():
        if not alias or not target:
            raise ConfigError(f"queueAliases[{alias!r}]: neither the name nor the queue it means may be empty")
    try:
        topology.validate_topologies(cfg.topologies)
    except ValueError as e:
        raise ConfigError(f"topologies{e}") from None
    feats = cfg.features()
    for i, prof in enumerate(cfg.profiles):
        try:
            registry.resolve_profile(
                prof, feats, topology_aware=cfg.topology_aware(), reservations=cfg.holds_reservations()
            )
        except registry.RegistryError as e:
            raise ConfigError(f"profiles[{i}].{e}") from None
    if cfg.profile(cfg.extender.profile) is None:
        raise ConfigError(f"extender.profile: no profile named {cfg.extender.profile!r}")
    try:
        validate_queues(cfg.queues)
    except InvalidArgument as e:
        raise ConfigError(str(e)) from None
    queue_sorts = {
        tuple(
            registry.resolve_profile(
                p, feats, topology_aware=cfg.topology_aware(), reservations=cfg.holds_reservations()
            ).queue_sort
        )
        for p in cfg.profiles
    }
    if len(queue_sorts) > 1:
        raise ConfigError("profiles: every profile must use the same queueSort plugin")


def _validate_aliases(cfg: BerthConfiguration) -> None:
    """A profile's ``aliases`` are more scheduler names it answers to: each a
    valid name, and no name claimed twice (by two profiles, or a profile and
    an alias), since a pod must have exactly one scheduler."""
    owner = {p.scheduler_name: f"profiles[{i}].schedulerName" for i, p in enumerate(cfg.profiles)}
    for i, prof in enumerate(cfg.profiles):
        for j, alias in enumerate(prof.aliases):
            path = f"profiles[{i}].aliases[{j}]"
            if not alias or not _DNS_LABEL.match(alias):
                raise ConfigError(f"{path}: {alias!r} is not a valid scheduler name")
            if alias in owner:
                raise ConfigError(f"{path}: {alias!r} is already claimed by {owner[alias]}")
            owner[alias] = path


#: The largest configuration file read: four times a ConfigMap's 1 MiB, the
#: most a configuration mounted from one can hold. A bigger file is refused
#: before it is parsed (a 50 MB one held the loop 33 s: issue 28).
MAX_CONFIG_BYTES = 4 * 1024 * 1024


def load(path: str | Path | None) -> BerthConfiguration:
    """Read a configuration file (None: the defaults)."""
    if path is None:
        return parse({})
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            mib = MAX_CONFIG_BYTES // (1024 * 1024)
            raise ConfigError(f"{p}: larger than {mib} MiB; a configuration is far smaller")
        text = raw.decode()
    except OSError as e:
        raise ConfigError(f"{p}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not UTF-8 text: {e.reason} at byte {e.start}") from None
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
