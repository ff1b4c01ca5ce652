"""Who may change Berth's state over gRPC, and the files that say so.

Mutating RPCs (:data:`MUTATING_METHODS`: the Cluster feed except ListNodes,
and Scheduler's Submit, Cancel and Bind) need an authenticated client; the
read-only ones (Filter, Prioritize, Preempt, Explain, WatchDecisions,
WatchDecisionBatches, ListQueues, GetQueue, ListPods, ListPodGroups, Why, WhatIf,
ListNodes, health, reflection) stay open. A client is authenticated by

- a client certificate: with ``grpc.tls.clientCAFile`` grpc core refuses, at
  the TLS handshake, every client whose certificate that CA did not sign; or
- ``authorization: Bearer <token>`` metadata equal to the token read at start
  from ``grpc.auth.tokenFile`` (compared with :func:`hmac.compare_digest`),
  as the API server's ``--token-auth-file`` bearer tokens.

With neither configured, mutations are open, which :func:`validate` allows
only on loopback (``berth serve``'s default ``grpc.host``) or when
``grpc.auth.allowUnauthenticatedMutations: true`` says so explicitly.

Every file Berth reads for this (token, certificate, key, client CA) is read
once at start; a missing or unreadable one is one :class:`ConfigError` line
naming the field and the file.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import ssl
from pathlib import Path

import grpc

from berth import errors
from berth.config import ConfigError, GrpcConfig, TLSConfig

__all__ = [
    "MUTATING_METHODS",
    "Authenticator",
    "is_loopback",
    "read_file",
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


def is_loopback(host: str) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ::1; all-interfaces ("",
    0.0.0.0, ::) and every other name or address are not loopback."""
    host = host.strip().removeprefix("[").removesuffix("]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_file(field: str, path: str) -> bytes:
    """The bytes of ``path``, or ConfigError ``field: cannot read path: why``."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"{field}: cannot read {path}: {e.strerror or e}") from None


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


class Authenticator:
    """Decides, per call, whether a mutating RPC may proceed."""

    def __init__(self, cfg: GrpcConfig) -> None:
        validate(cfg)
        self.token = _token(cfg)
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

    def check(self, method: str, context: grpc.aio.ServicerContext) -> None:
        """Raise :class:`errors.Unauthenticated` unless the call may proceed."""
        if not self.required or method not in MUTATING_METHODS:
            return
        if self.client_certificates and context.peer_identities():
            return  # grpc core verified the certificate against clientCAFile
        presented = _bearer(context.invocation_metadata() or ())
        if self.token is not None and presented is not None:
            if hmac.compare_digest(presented.encode(), self.token):
                return
            raise errors.Unauthenticated(f"{method}: the bearer token is not the one in grpc.auth.tokenFile")
        how = []
        if self.token is not None:
            how.append("send metadata 'authorization: Bearer <token>' with the token in grpc.auth.tokenFile")
        if self.client_certificates:
            how.append("present a client certificate signed by grpc.tls.clientCAFile")
        raise errors.Unauthenticated(f"{method} changes state and needs an authenticated client: {' or '.join(how)}")


def _bearer(metadata: object) -> str | None:
    for key, value in metadata:  # type: ignore[attr-defined]
        if key == "authorization" and isinstance(value, str) and value[: len(_BEARER)].lower() == _BEARER:
            return value[len(_BEARER) :].strip()
    return None
