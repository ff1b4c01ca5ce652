"""The API server vouches for Berth's callers, and Berth writes as them.

- :class:`ApiServerReviewer` is :class:`berth.access.Reviewer` over
  ``authentication.k8s.io/v1`` TokenReview and ``authorization.k8s.io/v1``
  SubjectAccessReview, asked with Berth's own identity (the chart binds it
  to ``system:auth-delegator``, as every aggregated API server and
  kube-rbac-proxy is bound);
- :class:`CallerWrites` creates and deletes the objects of the batch API
  (``Submit``/``Cancel``) **as the caller**: with the caller's own bearer
  token on a client that carries no credential of Berth's, so the API
  server's authentication, RBAC, admission and Pod Security apply exactly
  as for ``kubectl create`` and Berth's ServiceAccount needs no right to
  create pods. (The client must carry no client certificate of Berth's: the
  API server tries the x509 authenticator before bearer tokens, so a
  request presenting both would be Berth's.) A caller a verified client
  certificate named has no token: with ``impersonate_certificates``
  (``grpc.auth.impersonateCertificateCallers``) its writes go on Berth's
  own client with ``Impersonate-User``/``Impersonate-Group`` headers, as
  ``kubectl --as`` and kube-rbac-proxy send them (k8s.io/apiserver@v0.37.2
  pkg/endpoints/filters/impersonation.go: the API server checks that Berth
  may ``impersonate`` that user and each group, then authorises, admits
  and audits the write as the impersonated user; each group is a header
  line of its own, not a list).

A refusal keeps the API server's message and status; :func:`error_of`
turns it into the error kind of the same meaning (403 → PermissionDenied,
422 → InvalidArgument, 409 → AlreadyExists, 404 → NotFound, 401 →
Unauthenticated, 5xx and no answer → Unavailable).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from multidict import CIMultiDict

from berth import access, errors
from berth.adapters.kubernetes import kubeconfig as _kubeconfig

__all__ = ["ApiServerReviewer", "CallerWrites", "error_of", "impersonation_headers"]

log = logging.getLogger(__name__)

#: A review or a caller's write gives up after this (the caller is waiting).
REQUEST_TIMEOUT_SECONDS = 10.0


def _status_message(e: ApiException) -> str:
    """The ``message`` of the API server's Status body, else its reason."""
    try:
        body = json.loads(e.body or b"{}")
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    except (ValueError, TypeError):
        pass
    return f"{e.status} {e.reason}".strip()


_KINDS: Mapping[int, type[errors.BerthError]] = {
    400: errors.InvalidArgument,
    401: errors.Unauthenticated,
    403: errors.PermissionDenied,
    404: errors.NotFound,
    409: errors.AlreadyExists,
    422: errors.InvalidArgument,
    429: errors.ResourceExhausted,
}


def error_of(e: BaseException) -> errors.BerthError:
    """The error kind a failed API request means to Berth's caller."""
    if isinstance(e, ApiException):
        kind = _KINDS.get(int(e.status or 0), errors.Unavailable)
        message = _status_message(e)
        if kind is errors.Unavailable:
            message = f"the API server answered {e.status}: {message}"
        return kind(message)
    if isinstance(e, (aiohttp.ClientError, OSError, TimeoutError)):
        return errors.Unavailable(f"the API server cannot be reached: {type(e).__name__}: {e}")
    raise e


class ApiServerReviewer:
    """TokenReview and SubjectAccessReview with Berth's own client."""

    def __init__(self, api: client.ApiClient, *, audiences: list[str] | None = None) -> None:
        self.authn = client.AuthenticationV1Api(api)
        self.authz = client.AuthorizationV1Api(api)
        self.audiences = audiences or None

    async def review_token(self, token: str) -> access.Caller:
        body = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token, audiences=self.audiences))
        try:
            review = await self.authn.create_token_review(body, _request_timeout=REQUEST_TIMEOUT_SECONDS)
        except Exception as e:
            raise error_of(e) from None
        status = review.status
        if status is None or not status.authenticated or status.user is None:
            why = (status.error if status is not None else "") or "the token belongs to nobody"
            raise errors.Unauthenticated(f"the API server did not accept the bearer token (TokenReview): {why}")
        user = status.user
        extra = tuple(sorted((k, tuple(v or ())) for k, v in (user.extra or {}).items()))
        return access.Caller(
            user=user.username or "", groups=tuple(user.groups or ()), uid=user.uid or "", extra=extra, token=token
        )

    async def review_access(self, caller: access.Caller, attrs: access.Attributes) -> tuple[bool, str]:
        spec = client.V1SubjectAccessReviewSpec(
            user=caller.user,
            groups=list(caller.groups) or None,
            uid=caller.uid or None,
            extra={k: list(v) for k, v in caller.extra} or None,
            resource_attributes=client.V1ResourceAttributes(
                verb=attrs.verb,
                resource=attrs.resource,
                group=attrs.group,
                namespace=attrs.namespace or None,
                name=attrs.name or None,
                subresource=attrs.subresource or None,
            ),
        )
        try:
            review = await self.authz.create_subject_access_review(
                client.V1SubjectAccessReview(spec=spec), _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        except Exception as e:
            raise error_of(e) from None
        status = review.status
        if status is None:
            return False, ""
        if status.evaluation_error:
            log.debug("SubjectAccessReview for %s %s: %s", caller.user, attrs, status.evaluation_error)
        return bool(status.allowed) and not status.denied, status.reason or ""


def anonymous_client(api: client.ApiClient) -> client.ApiClient:
    """A client for ``api``'s server and CA with no credential of its own:
    each request then carries the caller's token (``_request_auth``)."""
    mine = api.configuration
    cfg = client.Configuration(host=mine.host)
    cfg.ssl_ca_cert = mine.ssl_ca_cert
    cfg.verify_ssl = mine.verify_ssl
    cfg.assert_hostname = getattr(mine, "assert_hostname", None)
    cfg.tls_server_name = getattr(mine, "tls_server_name", None)
    cfg.proxy = getattr(mine, "proxy", None)
    anon = client.ApiClient(cfg)
    _kubeconfig.skip_proxy_lookups(anon)
    return anon


def impersonation_headers(caller: access.Caller) -> list[tuple[str, str]]:
    """The headers that make a request ``caller``'s (client-go's
    transport.ImpersonationConfig: one ``Impersonate-Group`` line per group,
    ``Impersonate-Extra-<key>`` with the key %-escaped)."""
    out = [("Impersonate-User", caller.user)]
    out += [("Impersonate-Group", g) for g in caller.groups]
    if caller.uid:
        out.append(("Impersonate-Uid", caller.uid))
    out += [(f"Impersonate-Extra-{quote(k, safe='')}", v) for k, vs in caller.extra for v in vs]
    return out


class CallerWrites:
    """The batch API's writes, made as the caller (module docstring)."""

    def __init__(self, api: client.ApiClient, *, impersonate_certificates: bool = False) -> None:
        self._mine = api
        self._api: client.ApiClient | None = None
        self.impersonate_certificates = impersonate_certificates

    @property
    def api(self) -> client.ApiClient:
        """Made at the first write: most replicas never write as a caller."""
        if self._api is None:
            self._api = anonymous_client(self._mine)
        return self._api

    async def close(self) -> None:
        if self._api is not None:
            await self._api.close()

    async def _send(self, caller: access.Caller, method: str, path: str, body: Any) -> Any:
        """The response to ``method path`` made as ``caller``."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if caller.token:
            auth = {"in": "header", "key": "authorization", "value": f"Bearer {caller.token}", "type": "api_key"}
            return await self.api.call_api(
                path,
                method,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _request_auth=auth,  # type: ignore[arg-type]  # a dict, as _apply_auth_params reads it
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        if not (caller.certificate and self.impersonate_certificates):
            hint = (
                "; a client-certificate caller can write once grpc.auth.impersonateCertificateCallers is true"
                if caller.certificate
                else ""
            )
            raise errors.Unauthenticated(
                "this Berth writes through the API server as its caller: send a Kubernetes bearer token "
                f"(berth --token-file, $BERTH_TOKEN, or a kubeconfig user with a token){hint}"
            )
        # Berth's own credential (its token, or the client certificate on
        # its client's TLS context), then who it acts as.
        mine: dict[str, str] = {}
        await self._mine.update_params_for_auth(mine, [], ["BearerToken"])
        sent = CIMultiDict(headers)
        sent.update(mine)
        sent.extend(impersonation_headers(caller))
        url = f"{self._mine.configuration.host}{path}"
        return await self._mine.rest_client.request(
            method,
            url,
            headers=sent,  # type: ignore[arg-type]  # a multidict: a header line per group
            body=body,
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT_SECONDS,
        )

    async def _call(self, caller: access.Caller, method: str, path: str, body: Any = None) -> Any:
        try:
            resp = await self._send(caller, method, path, body)
            try:
                raw = await resp.read()
                status, reason = resp.status, resp.reason
            finally:
                resp.release()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            raise error_of(e) from None
        if not 200 <= status < 300:
            refused = ApiException(status=status, reason=reason)
            refused.body = raw
            raise error_of(refused)
        return json.loads(raw) if raw else None

    async def create_pod(self, caller: access.Caller, pod: Mapping[str, Any]) -> Mapping[str, Any]:
        """POST the pod in its namespace; the created object."""
        ns = quote(str(pod["metadata"]["namespace"]), safe="")
        created = await self._call(caller, "POST", f"/api/v1/namespaces/{ns}/pods", pod)
        return created if isinstance(created, dict) else {}

    async def delete_pod(self, caller: access.Caller, namespace: str, name: str, uid: str) -> None:
        """DELETE the pod, only if it is still the one with ``uid``."""
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
        await self._call(caller, "DELETE", path, body)

    async def create_pod_group(self, caller: access.Caller, group: Mapping[str, Any]) -> Mapping[str, Any]:
        """POST a scheduler-plugins PodGroup; an identical one already there is kept."""
        md = group["metadata"]
        ns, name = quote(str(md["namespace"]), safe=""), quote(str(md["name"]), safe="")
        base = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"
        try:
            created = await self._call(caller, "POST", base, group)
        except errors.AlreadyExists:
            existing = await self._call(caller, "GET", f"{base}/{name}")
            if isinstance(existing, dict) and existing.get("spec", {}) == group.get("spec", {}):
                return existing
            raise errors.AlreadyExists(
                f"podgroups.scheduling.x-k8s.io {md['name']!r} already exists in namespace {md['namespace']!r} "
                "with a different spec"
            ) from None
        return created if isinstance(created, dict) else {}
