"""Security defaults of the gRPC port: who may mutate, where Berth listens,
and what a missing credential file says."""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from berth import config
from berth.adapters.grpc import convert, security
from berth.adapters.http.tls import server_ssl_context
from berth.api.v1 import cluster_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.testing import make_pod
from tests.certs import CA
from tests.grpc.conftest import Served, serving

TOKEN = "s3cret-token-of-forty-characters-000000"

READ_ONLY = {
    "/berth.v1.Scheduler/Filter",
    "/berth.v1.Scheduler/Prioritize",
    "/berth.v1.Scheduler/Preempt",
    "/berth.v1.Scheduler/Explain",
    "/berth.v1.Scheduler/WatchDecisions",
    "/berth.v1.Scheduler/WatchDecisionBatches",
    "/berth.v1.Scheduler/ListQueues",
    "/berth.v1.Scheduler/GetQueue",
    "/berth.v1.Scheduler/ListPods",
    "/berth.v1.Scheduler/Why",
    "/berth.v1.Scheduler/WhatIf",
    "/berth.v1.Scheduler/ListPodGroups",
    "/berth.v1.Scheduler/ListProfiles",
    "/berth.v1.Cluster/ListNodes",
}


def test_mutating_methods_are_the_feed_submit_cancel_and_bind() -> None:
    every = {
        f"/{s.full_name}/{m.name}"
        for pb in (scheduler_pb2, cluster_pb2)
        for s in pb.DESCRIPTOR.services_by_name.values()
        for m in s.methods
    }
    assert every == security.MUTATING_METHODS | READ_ONLY
    assert not security.MUTATING_METHODS & READ_ONLY
    cluster = {m for m in every if m.startswith("/berth.v1.Cluster/")} - {"/berth.v1.Cluster/ListNodes"}
    assert cluster <= security.MUTATING_METHODS


def test_both_ports_listen_on_loopback_unless_configured() -> None:
    cfg = config.parse({})
    assert (cfg.http.host, cfg.grpc.host) == ("127.0.0.1", "127.0.0.1")
    assert not cfg.grpc.auth.allow_unauthenticated_mutations and cfg.grpc.auth.token_file is None


# ---------------------------------------------------------------- start-up rule


def grpc_cfg(**doc: Any) -> config.GrpcConfig:
    return config.parse({"grpc": doc}).grpc


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.53", "::1", "[::1]", "localhost"])
def test_loopback_may_run_without_authentication(host: str) -> None:
    security.validate(grpc_cfg(host=host))


@pytest.mark.parametrize("host", ["0.0.0.0", "", "::", "10.1.2.3", "berth.example.com"])
def test_beyond_loopback_without_authentication_refuses_to_start(host: str) -> None:
    with pytest.raises(config.ConfigError) as err:
        security.validate(grpc_cfg(host=host))
    assert str(err.value) == (
        f"grpc.host: listening on {host or '0.0.0.0'} needs authentication of mutating RPCs: "
        "set grpc.auth.tokenFile or grpc.tls.clientCAFile, or grpc.auth.allowUnauthenticatedMutations: true"
    )


def test_beyond_loopback_with_a_token_a_client_ca_or_an_explicit_opt_out_starts(tmp_path: Path) -> None:
    ca = CA(tmp_path)
    srv = ca.issue("berth", server=True)
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    tls = {"certFile": str(srv.cert), "keyFile": str(srv.key), "clientCAFile": str(ca.path)}
    security.validate(grpc_cfg(host="0.0.0.0", auth={"tokenFile": str(token)}))
    security.validate(grpc_cfg(host="0.0.0.0", tls=tls))
    security.validate(grpc_cfg(host="0.0.0.0", auth={"allowUnauthenticatedMutations": True}))


async def test_grpc_server_itself_enforces_the_start_up_rule() -> None:
    with pytest.raises(config.ConfigError, match=r"grpc\.host: listening on 0\.0\.0\.0 needs authentication"):
        async with serving({"host": "0.0.0.0"}):
            pass


# ---------------------------------------------------------------- unreadable files


@pytest.mark.parametrize(
    ("field", "build"),
    [
        ("grpc.auth.tokenFile", lambda files: grpc_cfg(auth={"tokenFile": files["missing"]})),
        ("grpc.tls.certFile", lambda files: grpc_cfg(tls={**files["tls"], "certFile": files["missing"]})),
        ("grpc.tls.keyFile", lambda files: grpc_cfg(tls={**files["tls"], "keyFile": files["missing"]})),
        ("grpc.tls.clientCAFile", lambda files: grpc_cfg(tls={**files["tls"], "clientCAFile": files["missing"]})),
        ("http.tls.certFile", lambda files: config.TLSConfig(**{**files["py"], "cert_file": files["missing"]})),
        ("http.tls.keyFile", lambda files: config.TLSConfig(**{**files["py"], "key_file": files["missing"]})),
        (
            "http.tls.clientCAFile",
            lambda files: config.TLSConfig(**{**files["py"], "client_ca_file": files["missing"]}),
        ),
    ],
)
def test_a_missing_file_stops_start_up_with_one_line_naming_field_and_file(
    tmp_path: Path, field: str, build: Any
) -> None:
    ca = CA(tmp_path)
    srv = ca.issue("berth", server=True)
    missing = str(tmp_path / "nowhere" / "file.pem")
    files = {
        "missing": missing,
        "tls": {"certFile": str(srv.cert), "keyFile": str(srv.key), "clientCAFile": str(ca.path)},
        "py": {"cert_file": str(srv.cert), "key_file": str(srv.key), "client_ca_file": str(ca.path)},
    }
    cfg = build(files)
    with pytest.raises(config.ConfigError) as err:
        if isinstance(cfg, config.TLSConfig):
            server_ssl_context(cfg)
        else:
            security.validate(cfg)
    assert str(err.value) == f"{field}: cannot read {missing}: No such file or directory"


def test_an_empty_token_file_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(" \n")
    with pytest.raises(config.ConfigError, match=f"grpc.auth.tokenFile: {token} is empty"):
        security.validate(grpc_cfg(auth={"tokenFile": str(token)}))


# ---------------------------------------------------------------- the port


async def test_a_second_server_on_the_same_port_fails_with_address_in_use() -> None:
    """grpc sets SO_REUSEPORT by default: both would listen and clients
    would reach either. Berth turns it off."""
    async with serving() as first:
        port = first.server.port
        with pytest.raises(OSError) as err:
            async with serving({"port": port}):
                pass
    assert err.value.errno == errno.EADDRINUSE
    assert str(err.value) == f"[Errno {errno.EADDRINUSE}] gRPC: address 127.0.0.1:{port} is already in use"


async def test_stop_with_grace_refuses_new_calls() -> None:
    async with serving() as s, s.channel() as ch:
        await ch.unary_unary("/berth.v1.Cluster/ListNodes")(b"")
        await s.server.stop(1.0)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await ch.unary_unary("/berth.v1.Cluster/ListNodes")(b"", timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


# ---------------------------------------------------------------- who may mutate


async def call(ch: grpc.aio.Channel, method: str, metadata: tuple[tuple[str, str], ...] = ()) -> grpc.StatusCode:
    """The status of ``method`` with an empty (valid) request."""
    try:
        if method.endswith(("/WatchDecisions", "/WatchDecisionBatches")):
            # Replay answers at once when a pod is known (else it waits for one).
            replay = scheduler_pb2.WatchDecisionsRequest(replay=True).SerializeToString()
            stream = ch.unary_stream(method)(replay, metadata=metadata, timeout=10)
            await stream.read()
            stream.cancel()
        else:
            await ch.unary_unary(method)(b"", metadata=metadata, timeout=10)
    except grpc.aio.AioRpcError as e:
        return e.code()
    return grpc.StatusCode.OK


@pytest.fixture
async def token_server(tmp_path: Path) -> AsyncIterator[Served]:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    async with serving({"auth": {"tokenFile": str(path)}}) as s:
        yield s


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ((), grpc.StatusCode.UNAUTHENTICATED),
        ((("authorization", "Bearer wrong"),), grpc.StatusCode.UNAUTHENTICATED),
        ((("authorization", f"Bearer {TOKEN}x"),), grpc.StatusCode.UNAUTHENTICATED),
        ((("authorization", TOKEN),), grpc.StatusCode.UNAUTHENTICATED),
        ((("authorization", f"Bearer {TOKEN}"),), grpc.StatusCode.OK),
        ((("authorization", f"bearer {TOKEN}"),), grpc.StatusCode.OK),
    ],
    ids=["no token", "wrong token", "longer token", "no Bearer scheme", "right token", "scheme any case"],
)
async def test_mutating_rpcs_need_the_token(
    token_server: Served, metadata: tuple[tuple[str, str], ...], expected: grpc.StatusCode
) -> None:
    async with token_server.channel() as ch:
        for method in sorted(security.MUTATING_METHODS):
            code = await call(ch, method, metadata)
            # Authenticated calls may still fail on the empty request itself.
            assert (code == grpc.StatusCode.UNAUTHENTICATED) == (expected == grpc.StatusCode.UNAUTHENTICATED), (
                method,
                code,
            )


async def test_unauthenticated_says_how_to_authenticate(token_server: Served) -> None:
    async with token_server.channel() as ch:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await ch.unary_unary("/berth.v1.Cluster/UpsertNodes")(b"")
    assert err.value.details() == (
        "/berth.v1.Cluster/UpsertNodes changes state and needs an authenticated client: "
        "send metadata 'authorization: Bearer <token>' with the token in grpc.auth.tokenFile"
    )
    assert token_server.core.cache.node_count == 2


async def test_read_only_rpcs_stay_open(token_server: Served) -> None:
    async with token_server.channel() as ch:
        pod = convert.pod_to_pb(make_pod("known", scheduler_name="berth"))
        bearer = (("authorization", f"Bearer {TOKEN}"),)
        await scheduler_pb2_grpc.SchedulerStub(ch).Submit(scheduler_pb2.SubmitRequest(pods=[pod]), metadata=bearer)
        for method in sorted(READ_ONLY):
            assert await call(ch, method) != grpc.StatusCode.UNAUTHENTICATED, method
        assert await call(ch, "/grpc.health.v1.Health/Check") == grpc.StatusCode.OK


async def test_loopback_without_credentials_leaves_mutations_open() -> None:
    async with serving() as s, s.channel() as ch:
        assert await call(ch, "/berth.v1.Cluster/UpsertNodes") == grpc.StatusCode.OK


async def test_explicit_opt_out_accepts_unauthenticated_mutations(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN)
    auth = {"tokenFile": str(path), "allowUnauthenticatedMutations": True}
    async with serving({"auth": auth}) as s, s.channel() as ch:
        assert await call(ch, "/berth.v1.Cluster/UpsertNodes") == grpc.StatusCode.OK


# ---------------------------------------------------------------- mTLS


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Any]:
    ca = CA(tmp_path)
    (tmp_path / "other").mkdir()
    return {
        "ca": ca,
        "server": ca.issue("berth", server=True),
        "client": ca.issue("batch-system", client=True),
        "stranger": CA(tmp_path / "other", "other-ca").issue("stranger", client=True),
    }


def client_credentials(pki: dict[str, Any], leaf: str | None) -> grpc.ChannelCredentials:
    root = pki["ca"].path.read_bytes()
    if leaf is None:
        return grpc.ssl_channel_credentials(root_certificates=root)
    cert = pki[leaf]
    return grpc.ssl_channel_credentials(root, cert.key.read_bytes(), cert.cert.read_bytes())


@pytest.mark.parametrize(
    ("leaf", "metadata", "expected"),
    [
        ("client", (), grpc.StatusCode.OK),
        (None, (), grpc.StatusCode.UNAVAILABLE),
        ("stranger", (), grpc.StatusCode.UNAVAILABLE),
    ],
    ids=["certificate from the client CA", "no certificate", "certificate from another CA"],
)
async def test_client_ca_refuses_clients_without_its_certificate(
    pki: dict[str, Any], leaf: str | None, metadata: tuple[tuple[str, str], ...], expected: grpc.StatusCode
) -> None:
    srv = pki["server"]
    tls = {"certFile": str(srv.cert), "keyFile": str(srv.key), "clientCAFile": str(pki["ca"].path)}
    async with serving({"tls": tls}) as s, s.channel(client_credentials(pki, leaf)) as ch:
        assert await call(ch, "/berth.v1.Cluster/UpsertNodes", metadata) == expected
        if expected == grpc.StatusCode.OK:
            assert await call(ch, "/berth.v1.Cluster/ListNodes") == grpc.StatusCode.OK


async def test_token_over_tls_without_client_certificates(pki: dict[str, Any], tmp_path: Path) -> None:
    srv = pki["server"]
    token = tmp_path / "token"
    token.write_text(TOKEN)
    cfg = {"tls": {"certFile": str(srv.cert), "keyFile": str(srv.key)}, "auth": {"tokenFile": str(token)}}
    async with serving(cfg) as s, s.channel(client_credentials(pki, None)) as ch:
        method = "/berth.v1.Cluster/UpsertNodes"
        assert await call(ch, method) == grpc.StatusCode.UNAUTHENTICATED
        assert await call(ch, method, (("authorization", f"Bearer {TOKEN}"),)) == grpc.StatusCode.OK


@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("mismatch", "grpc.tls.certFile/keyFile: not a matching PEM certificate and key: "),
        ("junk certificate", "grpc.tls.certFile/keyFile: not a matching PEM certificate and key: "),
        ("junk client CA", "grpc.tls.clientCAFile: not a PEM CA certificate: "),
    ],
)
def test_unusable_tls_material_is_one_line_not_a_failed_bind(tmp_path: Path, which: str, message: str) -> None:
    """grpc core would log it and then fail to "bind" the port."""
    ca = CA(tmp_path)
    srv, other = ca.issue("berth", server=True), ca.issue("other", server=True)
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    tls = {"certFile": str(srv.cert), "keyFile": str(srv.key), "clientCAFile": str(ca.path)}
    tls |= {
        "mismatch": {"keyFile": str(other.key)},
        "junk certificate": {"certFile": str(junk)},
        "junk client CA": {"clientCAFile": str(junk)},
    }[which]
    with pytest.raises(config.ConfigError) as err:
        security.validate(grpc_cfg(tls=tls))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
