"""Who may call which gRPC methods, and the files that say so.

Mutating RPCs (:data:`MUTATING_METHODS`: the Cluster feed except ListNodes,
and Scheduler's Submit, Cancel and Bind) need an authenticated client where
any credential is configured. A client is authenticated by

- a client certificate: with ``grpc.tls.clientCAFile`` grpc core refuses, at
  the TLS handshake, every client whose certificate that CA did not sign;
- ``authorization: Bearer <token>`` metadata equal to the token read at start
  from ``grpc.auth.tokenFile`` (compared with :func:`hmac.compare_digest`),
  as the API server's ``--token-auth-file`` bearer tokens; or
- in Kubernetes mode (``core.authority`` set), a bearer token the API server
  vouches for (TokenReview, :mod:`berth.access`). Reads then need a caller
  too (``grpc.auth.reads: auto``) and show what its RBAC shows: the
  servicers filter pods, decisions and queues by it, and the calls that
  reveal every node need ``list nodes`` (:data:`CLUSTER_GRANTS`).

With no credential configured, mutations are open, which :func:`validate`
allows only on loopback (``berth serve``'s default ``grpc.host``) or when
``grpc.auth.allowUnauthenticatedMutations: true`` says so explicitly.
Health and reflection are always open. A standby replica refuses the calls
that answer from the scheduling loop's state (:data:`LEADER_ONLY_METHODS`)
with ``UNAVAILABLE``, naming the leader.

Every file Berth reads for this (token, certificate, key, client CA) is read
once at start; a missing or unreadable one is one :class:`ConfigError` line
naming the field and the file.
"""

from __future__ import annotations

import hmac
import logging
import ssl

import grpc

from berth import access, errors
from berth.adapters import rotation
from berth.adapters.credentials import is_loopback, read_file
from berth.config import ConfigError, GrpcConfig, TLSConfig
from berth.scheduling.core import Core

__all__ = [
    "CLUSTER_GRANTS",
    "LEADER_ONLY_METHODS",
    "MUTATING_METHODS",
    "Authenticator",
    "TokenFile",
    "is_loopback",
    "read_file",
    "reloading_server_credentials",
    "server_credentials",
    "validate",
]

log = logging.getLogger(__name__)

#: Full gRPC method names that change state (the contract:
#: ``protos/berth/v1/{cluster,scheduler}.proto``).
MUTATING_METHODS = frozenset(
    {
        "/berth.v1.Cluster/UpsertNodes",
        "/berth.v1.Cluster/DeleteNodes",
        "/berth.v1.Cluster/UpsertPods",
        "/berth.v1.Cluster/DeletePods",
        "/berth.v1.Cluster/UpsertPodGroups",
        "/berth.v1.Cluster/UpsertPodDisruptionBudgets",
        "/berth.v1.Cluster/UpsertNamespaces",
        "/berth.v1.Cluster/DeleteNamespaces",
        "/berth.v1.Cluster/UpsertPersistentVolumes",
        "/berth.v1.Cluster/DeletePersistentVolumes",
        "/berth.v1.Cluster/UpsertPersistentVolumeClaims",
        "/berth.v1.Cluster/DeletePersistentVolumeClaims",
        "/berth.v1.Cluster/UpsertStorageClasses",
        "/berth.v1.Cluster/DeleteStorageClasses",
        "/berth.v1.Cluster/UpsertCSINodes",
        "/berth.v1.Cluster/DeleteCSINodes",
        "/berth.v1.Cluster/UpsertDeviceClasses",
        "/berth.v1.Cluster/DeleteDeviceClasses",
        "/berth.v1.Cluster/UpsertResourceSlices",
        "/berth.v1.Cluster/DeleteResourceSlices",
        "/berth.v1.Cluster/UpsertResourceClaims",
        "/berth.v1.Cluster/DeleteResourceClaims",
        "/berth.v1.Scheduler/Submit",
        "/berth.v1.Scheduler/Cancel",
        "/berth.v1.Scheduler/Bind",
    }
)

_BEARER = "bearer "


def _token(cfg: GrpcConfig) -> bytes | None:
    if cfg.auth.token_file is None:
        return None
    token = read_file("grpc.auth.tokenFile", cfg.auth.token_file).strip()
    if not token:
        raise ConfigError(f"grpc.auth.tokenFile: {cfg.auth.token_file} is empty")
    return token


def validate(cfg: GrpcConfig) -> None:
    """Refuse a configuration that would expose unauthenticated mutations
    beyond loopback, or that names a file Berth cannot read (ConfigError).

    The composition root calls this before binding any port;
    :class:`~berth.adapters.grpc.server.GrpcServer` calls it again.
    """
    if cfg.tls is not None:
        server_credentials(cfg.tls)
    _token(cfg)
    authenticated = cfg.auth.token_file is not None or (cfg.tls is not None and cfg.tls.client_ca_file)
    if not authenticated and not cfg.auth.allow_unauthenticated_mutations and not is_loopback(cfg.host):
        raise ConfigError(
            f"grpc.host: listening on {cfg.host or '0.0.0.0'} needs authentication of mutating RPCs: "
            "set grpc.auth.tokenFile or grpc.tls.clientCAFile, or grpc.auth.allowUnauthenticatedMutations: true"
        )


def server_credentials(tls: TLSConfig) -> grpc.ServerCredentials:
    """TLS for the gRPC port; with ``clientCAFile`` clients must present a
    certificate that CA signed (grpc core refuses the others at the handshake)."""
    key = read_file("grpc.tls.keyFile", tls.key_file)
    cert = read_file("grpc.tls.certFile", tls.cert_file)
    ca = read_file("grpc.tls.clientCAFile", tls.client_ca_file) if tls.client_ca_file else None
    _check_pem(tls)
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)


def reloading_server_credentials(tls: TLSConfig) -> grpc.ServerCredentials:
    """As :func:`server_credentials`, re-read when the certificate, key or
    CA files change (at most once a second, checked as clients connect):
    ``grpc.dynamic_ssl_server_credentials`` asks the fetcher before each
    handshake, and a changed, loadable set of files is used from the next
    connection on (:mod:`berth.adapters.rotation`). Unreadable or
    mismatched files at start raise ConfigError as :func:`server_credentials`."""
    paths = [tls.cert_file, tls.key_file, *([tls.client_ca_file] if tls.client_ca_file else [])]

    def load() -> grpc.ServerCertificateConfiguration:
        key = read_file("grpc.tls.keyFile", tls.key_file)
        cert = read_file("grpc.tls.certFile", tls.cert_file)
        ca = read_file("grpc.tls.clientCAFile", tls.client_ca_file) if tls.client_ca_file else None
        _check_pem(tls)
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)

    watched = rotation.Watched("grpc.tls", paths, load)

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        # None: keep what is in use (grpc core calls this on its own thread).
        return watched.value if watched.check() else None

    return grpc.dynamic_ssl_server_credentials(
        watched.value, fetch, require_client_authentication=tls.client_ca_file is not None
    )


class TokenFile:
    """``grpc.auth.tokenFile``, re-read when it changes: :meth:`current` is
    the token in use, after a stat at most once a second; a changed file is
    read in a worker thread, never on the event loop, and used from the next
    call on. An empty or unreadable new file keeps the old token (logged)."""

    def __init__(self, path: str) -> None:
        def load() -> bytes:
            token = read_file("grpc.auth.tokenFile", path).strip()
            if not token:
                raise ConfigError(f"grpc.auth.tokenFile: {path} is empty")
            return token

        self._watched = rotation.Watched("grpc.auth.tokenFile", [path], load)

    def current(self) -> bytes:
        self._watched.poll()
        return self._watched.value


def _check_pem(tls: TLSConfig) -> None:
    """grpc core only logs why it rejects credentials and then fails to
    "bind"; OpenSSL through :mod:`ssl` says it before that, in one line."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        # A key that needs a passphrase fails instead of prompting on a terminal.
        ctx.load_cert_chain(tls.cert_file, tls.key_file, password=lambda: b"")
    except (OSError, ssl.SSLError) as e:
        reason = getattr(e, "reason", None) or e
        raise ConfigError(f"grpc.tls.certFile/keyFile: not a matching PEM certificate and key: {reason}") from None
    if tls.client_ca_file:
        try:
            ctx.load_verify_locations(cafile=tls.client_ca_file)
        except (OSError, ssl.SSLError) as e:
            reason = getattr(e, "reason", None) or e
            raise ConfigError(f"grpc.tls.clientCAFile: not a PEM CA certificate: {reason}") from None


#: Read-only RPCs that answer from the scheduling loop's state: on a
#: standby replica (which runs no loop) they would answer from an idle
#: queue, so they are refused there, naming the leader.
LEADER_ONLY_METHODS = frozenset(
    {
        "/berth.v1.Scheduler/Submit",
        "/berth.v1.Scheduler/Cancel",
        "/berth.v1.Scheduler/WatchDecisions",
        "/berth.v1.Scheduler/WatchDecisionBatches",
        "/berth.v1.Scheduler/ListQueues",
        "/berth.v1.Scheduler/GetQueue",
        "/berth.v1.Scheduler/ListPods",
        "/berth.v1.Scheduler/ListPodGroups",
        "/berth.v1.Scheduler/Why",
        "/berth.v1.Scheduler/WhatIf",
    }
)

#: What a caller the API server vouches for must be allowed, cluster-wide,
#: for the calls that reveal every node (as ``kubectl get nodes`` would);
#: the namespaced reads are filtered in the servicers instead.
LIST_NODES = access.Attributes("list", "nodes")
CLUSTER_GRANTS: dict[str, access.Attributes] = {
    "/berth.v1.Scheduler/Filter": LIST_NODES,
    "/berth.v1.Scheduler/Prioritize": LIST_NODES,
    "/berth.v1.Scheduler/Preempt": LIST_NODES,
    "/berth.v1.Scheduler/Explain": LIST_NODES,
    "/berth.v1.Scheduler/WhatIf": LIST_NODES,
    "/berth.v1.Cluster/ListNodes": LIST_NODES,
}

#: The services whose calls are Berth's; grpc's health and reflection are open.
_BERTH = ("/berth.v1.Scheduler/", "/berth.v1.Cluster/")

#: Who holds the static token file: everything, as the token's owner configured.
TOKEN_FILE_CALLER = access.Caller("berth:token-file", ("system:authenticated",), unrestricted=True)


class Authenticator:
    """The gRPC door: who is calling (:meth:`identify`), and whether this
    replica may answer at all (:meth:`admit`)."""

    def __init__(self, cfg: GrpcConfig, core: Core | None = None) -> None:
        validate(cfg)
        self.cfg = cfg
        self.core = core
        self.token = _token(cfg)
        #: The token file, re-read when it changes (TokenFile; None without one).
        self.token_file = TokenFile(cfg.auth.token_file) if cfg.auth.token_file is not None else None
        self.client_certificates = cfg.tls is not None and bool(cfg.tls.client_ca_file)
        #: False: every call passes (loopback without credentials, or the
        #: configuration accepts unauthenticated mutations).
        self.required = (self.token is not None or self.client_certificates) and not (
            cfg.auth.allow_unauthenticated_mutations
        )
        if cfg.auth.allow_unauthenticated_mutations and (self.token is not None or self.client_certificates):
            log.warning(
                "grpc.auth.allowUnauthenticatedMutations: true: mutating RPCs accept clients without the "
                "configured token or certificate"
            )
        if self.token is not None and cfg.tls is None and not is_loopback(cfg.host):
            log.warning("grpc.auth.tokenFile without grpc.tls: bearer tokens travel in plaintext")
        if cfg.auth.reads == "required" and self.token is None and not self.client_certificates:
            log.warning(
                "grpc.auth.reads: required without grpc.auth.tokenFile or grpc.tls.clientCAFile: "
                "only callers the Kubernetes API server vouches for can read"
            )

    @property
    def authority(self) -> access.Authority | None:
        return self.core.authority if self.core is not None else None

    def reads_required(self) -> bool:
        reads = self.cfg.auth.reads
        return reads == "required" or (reads == "auto" and self.authority is not None)

    def _how(self, method: str) -> str:
        how = []
        if self.authority is not None:
            how.append("send metadata 'authorization: Bearer <token>' with a Kubernetes token")
        if self.token is not None:
            how.append("send metadata 'authorization: Bearer <token>' with the token in grpc.auth.tokenFile")
        if self.client_certificates:
            how.append("present a client certificate signed by grpc.tls.clientCAFile")
        what = "changes state" if method in MUTATING_METHODS else "reads the scheduler's state"
        return f"{method} {what} and needs an authenticated client: {' or '.join(how) or 'no credential is configured'}"

    async def identify(self, method: str, context: grpc.aio.ServicerContext) -> access.Caller:
        """The caller of this call (:class:`errors.Unauthenticated` when it
        must be known and is not, or presents a credential nobody accepts;
        :class:`errors.PermissionDenied` for a cluster-wide grant it lacks)."""
        if not method.startswith(_BERTH):
            return access.ANYONE
        caller = await self._caller(method, context)
        grant = CLUSTER_GRANTS.get(method)
        authority = self.authority
        if grant is not None and authority is not None and not caller.unrestricted:
            await authority.require(caller, grant)
        return caller

    async def _caller(self, method: str, context: grpc.aio.ServicerContext) -> access.Caller:
        authority = self.authority
        if self.token_file is not None:
            self.token = self.token_file.current()
        presented = _bearer(context.invocation_metadata() or ())
        if presented is not None:
            if self.token is not None and hmac.compare_digest(presented.encode(), self.token):
                return TOKEN_FILE_CALLER
            if authority is not None:
                return await authority.authenticate(presented, client=_address(context))
            if self.token is not None:
                raise errors.Unauthenticated(f"{method}: the bearer token is not the one in grpc.auth.tokenFile")
            # No token is configured and nobody could check one: as before, ignored.
        if self.client_certificates and context.peer_identities():
            return _certificate_caller(context, restricted=authority is not None)
        mutating = method in MUTATING_METHODS
        if mutating and (self.required or authority is not None) and not self.cfg.auth.allow_unauthenticated_mutations:
            raise errors.Unauthenticated(self._how(method))
        if not mutating and self.reads_required():
            raise errors.Unauthenticated(self._how(method))
        return access.ANYONE

    def admit(self, method: str) -> None:
        """:class:`errors.Unavailable` for the leader's state asked of a standby."""
        core = self.core
        if core is None or not method.startswith(_BERTH):
            return
        core.refuse_on_standby(leaders_state=method in LEADER_ONLY_METHODS)


def _address(context: grpc.aio.ServicerContext) -> str:
    """The client's address, without its port (one client, many connections)."""
    return str(context.peer() or "unknown").rsplit(":", 1)[0]


def _certificate_caller(context: grpc.aio.ServicerContext, *, restricted: bool) -> access.Caller:
    """A verified client certificate's subject as the API server reads one:
    CN the user, each O a group (x509 ``CommonNameUserConversion``)."""
    auth = context.auth_context()
    cn = [v.decode(errors="replace") for v in auth.get("x509_common_name", [])]
    subject = (auth.get("x509_subject") or [b""])[0].decode(errors="replace")
    groups = tuple(part[2:] for part in subject.split(",") if part.startswith("O="))
    user = cn[0] if cn else subject
    return access.Caller(user, groups, unrestricted=not restricted, certificate=True)


def _bearer(metadata: object) -> str | None:
    for key, value in metadata:  # type: ignore[attr-defined]
        if key == "authorization" and isinstance(value, str) and value[: len(_BEARER)].lower() == _BEARER:
            return value[len(_BEARER) :].strip()
    return None
