"""Who is calling Berth, and what they may see or change.

Every door (gRPC, the extender's HTTP verbs, the dashboard) turns its
credential into a :class:`Caller` and asks an :class:`Authority` the
questions the API server itself would ask — so that in Kubernetes mode a
caller sees through Berth exactly what ``kubectl`` would show it:

- *authentication*: a bearer token becomes a user with groups
  (``authentication.k8s.io/v1`` TokenReview in Kubernetes mode, the
  static ``grpc.auth.tokenFile`` otherwise); a verified client certificate
  is its subject's CN as user and O as groups, as the API server reads one
  (``k8s.io/apiserver/pkg/authentication/request/x509/x509.go``
  ``CommonNameUserConversion``, v0.37.2);
- *authorization*: "may this user ``list pods`` in namespace X" is a
  ``authorization.k8s.io/v1`` SubjectAccessReview with the same attributes
  (:class:`Attributes`), and a refusal reads like the API server's
  (:func:`forbidden`).

Answers are cached as an aggregated API server's delegating authenticator
and authorizer cache them (``k8s.io/apiserver/pkg/server/options``
``authentication.go`` and ``authorization.go``, v0.37.2: 10 s for a
token, 10 s for an allowed and for a denied review), and identical
questions asked at once share one review. The reviews themselves are an
adapter's (:class:`Reviewer`; :mod:`berth.adapters.kubernetes.access`):
nothing here knows a transport.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from typing import Protocol, TypeVar

import cachetools

from berth import errors

__all__ = [
    "ANYONE",
    "CALLER",
    "Attributes",
    "Authority",
    "Caller",
    "Reviewer",
    "Scope",
    "flow_of",
    "forbidden",
]

T = TypeVar("T")

#: How long an answer is kept (``DelegatingAuthenticationOptions.CacheTTL``,
#: ``DelegatingAuthorizationOptions.AllowCacheTTL`` / ``DenyCacheTTL``).
TOKEN_TTL_SECONDS = 10.0
ALLOW_TTL_SECONDS = 10.0
DENY_TTL_SECONDS = 10.0
#: Entries kept at most per cache: a flood of distinct tokens evicts old
#: ones (the least recently used) instead of growing without bound.
MAX_CACHED = 10000
#: SubjectAccessReviews a :class:`Scope` sends at once.
REVIEWS_AT_ONCE = 16
#: Failed authentications one client (its address) may make per window;
#: past them it is refused without asking: every unknown token costs the
#: API server a TokenReview (a failure is not cached), and Berth must not
#: be an amplifier against it (kube-apiserver's own webhook authenticator
#: has no such bound; kube-rbac-proxy relies on the API server's APF).
FAILURES_PER_WINDOW = 20
FAILURE_WINDOW_SECONDS = 60.0


@dataclasses.dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller.

    ``token`` is the bearer token it presented, kept (out of ``repr`` and
    comparisons) so that a write Berth makes *for* it can be made *as* it
    (the API server then applies its RBAC, admission and Pod Security).
    ``unrestricted`` callers are not asked about: the holder of the static
    token file, or anyone where reads are open. ``certificate``: a verified
    client certificate named it (no token to write with: Berth may write as
    it by impersonation, ``grpc.auth.impersonateCertificateCallers``).
    """

    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    token: str | None = dataclasses.field(default=None, repr=False, compare=False)
    unrestricted: bool = False
    certificate: bool = dataclasses.field(default=False, compare=False)

    def __str__(self) -> str:
        return self.user


#: The caller of a door that checks nobody (reads left open, loopback).
ANYONE = Caller("system:anonymous", ("system:unauthenticated",), unrestricted=True)

#: The caller of the request being served. The doors set it once they have
#: authenticated a call (a grpc.aio handler and an aiohttp handler each run
#: in a task of their own, so a value never leaks to another request).
CALLER: contextvars.ContextVar[Caller] = contextvars.ContextVar("berth_caller", default=ANYONE)


def flow_of(caller: Caller, address: str) -> str:
    """Whom a caller's requests count against (stream budgets, fairness
    flows): its user when authenticated, else its address without the port
    (one client, many connections). Both doors name callers this way."""
    return f"user {caller.user}" if caller is not ANYONE else f"address {address}"


@dataclasses.dataclass(frozen=True, slots=True)
class Attributes:
    """A SubjectAccessReview's ``resourceAttributes``."""

    verb: str
    resource: str
    group: str = ""
    namespace: str = ""
    name: str = ""
    subresource: str = ""


def forbidden(caller: Caller, attrs: Attributes, reason: str = "") -> errors.PermissionDenied:
    """The API server's words for a refusal
    (``k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go``
    ``forbiddenMessage`` and ``NewForbidden``, v0.37.2)::

        pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "team-a"
    """
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if attrs.namespace:
        where = f"in the namespace {attrs.namespace!r}"
    else:
        where = "at the cluster scope"
    msg = (
        f'User "{caller.user}" cannot {attrs.verb} resource "{resource}" '
        f'in API group "{attrs.group}" {where}'.replace("'", '"')
    )
    if reason:
        msg = f"{msg}: {reason}"
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    target = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    return errors.PermissionDenied(f"{target} is forbidden: {msg}")


class Reviewer(Protocol):
    """The two questions an authority asks of whoever vouches for identities
    (the API server in Kubernetes mode)."""

    async def review_token(self, token: str) -> Caller:
        """The caller ``token`` belongs to, with ``token`` kept; raise
        :class:`errors.Unauthenticated` (with the reviewer's reason) when it
        belongs to nobody."""
        ...

    async def review_access(self, caller: Caller, attrs: Attributes) -> tuple[bool, str]:
        """Whether ``caller`` may do ``attrs``, and the reviewer's reason."""
        ...


class _Flights:
    """A TTL cache whose misses are fetched once however many ask at once.

    The fetch runs as a task of its own: a caller that goes away stops
    waiting for it, but does not cancel the answer others are waiting for
    (each review has its own timeout, the reviewer's)."""

    def __init__(self, ttl: Callable[[object], float], clock: Callable[[], float]) -> None:
        self._ttl = ttl
        self._clock = clock
        self._cache: cachetools.LRUCache[Hashable, tuple[float, object]] = cachetools.LRUCache(MAX_CACHED)
        self._inflight: dict[Hashable, asyncio.Task[object]] = {}

    async def get(self, key: Hashable, fetch: Callable[[], Awaitable[T]]) -> T:
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self._clock():
            return hit[1]  # type: ignore[return-value]
        task = self._inflight.get(key)
        if task is None:
            task = self._inflight[key] = asyncio.ensure_future(self._fetch(key, fetch))
            # Retrieved even when every asker has gone away (no "never retrieved" warning).
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return await asyncio.shield(task)  # type: ignore[arg-type]

    async def _fetch(self, key: Hashable, fetch: Callable[[], Awaitable[object]]) -> object:
        try:
            value = await fetch()
            self._cache[key] = (self._clock() + self._ttl(value), value)
            return value
        finally:
            del self._inflight[key]

    def clear(self) -> None:
        self._cache.clear()


class Authority:
    """Authentication and authorization answers, cached (module docstring)."""

    def __init__(
        self,
        reviewer: Reviewer,
        *,
        token_ttl: float = TOKEN_TTL_SECONDS,
        allow_ttl: float = ALLOW_TTL_SECONDS,
        deny_ttl: float = DENY_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reviewer = reviewer
        self._tokens = _Flights(lambda _: token_ttl, clock)
        self._access = _Flights(lambda answer: allow_ttl if answer[0] else deny_ttl, clock)  # type: ignore[index]
        self.reviews = 0  # reviews actually sent (tests and metrics)
        self._clock = clock
        #: client -> (window start, failures in it), the most recent clients kept.
        self._failures: cachetools.LRUCache[str, tuple[float, int]] = cachetools.LRUCache(MAX_CACHED)

    async def authenticate(self, token: str, *, client: str = "") -> Caller:
        """The caller ``token`` belongs to (:class:`errors.Unauthenticated`
        otherwise). ``client`` (an address) makes at most
        :data:`FAILURES_PER_WINDOW` failed attempts per window; past them it
        is refused (:class:`errors.ResourceExhausted`) without a review."""
        now = self._clock()
        start, failures = self._failures.get(client, (now, 0)) if client else (now, 0)
        if now - start >= FAILURE_WINDOW_SECONDS:
            start, failures = now, 0
        if client and failures >= FAILURES_PER_WINDOW:
            wait = FAILURE_WINDOW_SECONDS - (now - start)
            raise errors.ResourceExhausted(
                f"too many failed authentications from {client} ({failures} in {FAILURE_WINDOW_SECONDS:.0f} s); "
                f"retry in {wait:.0f} s"
            )

        async def review() -> Caller:
            self.reviews += 1
            return await self.reviewer.review_token(token)

        try:
            return await self._tokens.get(("token", token), review)
        except errors.Unauthenticated:
            if client:
                self._failures[client] = (start, failures + 1)
            raise

    async def allowed(self, caller: Caller, attrs: Attributes) -> tuple[bool, str]:
        """Whether ``caller`` may do ``attrs`` (an unrestricted caller always may)."""
        if caller.unrestricted:
            return True, ""

        async def review() -> tuple[bool, str]:
            self.reviews += 1
            return await self.reviewer.review_access(caller, attrs)

        key = (caller.user, caller.groups, caller.uid, caller.extra, attrs)
        return await self._access.get(key, review)

    async def require(self, caller: Caller, attrs: Attributes) -> None:
        """Raise the API server's :func:`forbidden` unless ``caller`` may do ``attrs``."""
        ok, reason = await self.allowed(caller, attrs)
        if not ok:
            raise forbidden(caller, attrs, reason)

    def scope(self, caller: Caller, verb: str, resource: str, group: str = "") -> Scope:
        return Scope(self, caller, verb, resource, group)


class Scope:
    """The namespaces in which one caller may ``verb`` ``resource``: the
    cluster-wide grant is asked first (one review for a cluster admin), then
    each namespace once, as it is met."""

    def __init__(self, authority: Authority | None, caller: Caller, verb: str, resource: str, group: str = "") -> None:
        self.authority = authority
        self.caller = caller
        self._attrs = Attributes(verb, resource, group)
        self._everything: bool | None = True if (authority is None or caller.unrestricted) else None
        self._namespaces: dict[str, bool] = {}

    async def everything(self) -> bool:
        """Whether the caller may ``verb`` ``resource`` in every namespace."""
        if self._everything is None:
            assert self.authority is not None
            self._everything, _ = await self.authority.allowed(self.caller, self._attrs)
        return self._everything

    async def admits(self, namespace: str) -> bool:
        if await self.everything():
            return True
        seen = self._namespaces.get(namespace)
        if seen is None:
            assert self.authority is not None
            attrs = dataclasses.replace(self._attrs, namespace=namespace)
            seen = self._namespaces[namespace] = (await self.authority.allowed(self.caller, attrs))[0]
        return seen

    async def filter(self, items: Sequence[T], namespace_of: Callable[[T], str]) -> list[T]:
        """``items`` in namespaces the caller may see, in order; the unseen
        namespaces are asked about :data:`REVIEWS_AT_ONCE` at a time."""
        if await self.everything():
            return list(items)
        await self.learn(namespace_of(x) for x in items)
        return [x for x in items if self._namespaces.get(namespace_of(x), False)]

    async def learn(self, namespaces: Iterable[str]) -> None:
        """Ask about each namespace not yet known (bounded concurrency)."""
        unknown = sorted(set(namespaces) - self._namespaces.keys())
        gate = asyncio.Semaphore(REVIEWS_AT_ONCE)

        async def ask(ns: str) -> None:
            async with gate:
                await self.admits(ns)

        async with asyncio.TaskGroup() as tg:
            for ns in unknown:
                tg.create_task(ask(ns))

    def admits_known(self, namespace: str) -> bool | None:
        """The answer already known for ``namespace``, without asking (None: not asked yet)."""
        if self._everything:
            return True
        return self._namespaces.get(namespace)

    def denial(self, namespace: str) -> errors.PermissionDenied:
        return forbidden(self.caller, dataclasses.replace(self._attrs, namespace=namespace))
