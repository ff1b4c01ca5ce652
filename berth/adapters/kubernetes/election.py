"""Leader election on a ``coordination.k8s.io`` Lease: kubernetes-asyncio's
``LeaderElection`` with what client-go's ``LeaderElector`` adds around it
(``k8s.io/client-go/tools/leaderelection/leaderelection.go``).

kubernetes-asyncio (36.x) decides who leads; it does not

- survive the API server going away: a refused connection escapes its
  ``try_acquire_or_renew`` instead of counting as a failed attempt, and the
  leading coroutine it started is left running. :class:`_Lock` turns
  transport errors and timeouts into failed attempts, so a leader keeps
  retrying until ``renewDeadline`` as client-go's ``renew`` does, and a
  follower waits for the API server with the reflector's backoff (one log
  line per step, not one per ``retryPeriod``);
- own the term: :class:`LeaderElector` runs each term as its own task and
  always ends it — lease lost, election failed or shut down — before
  anything else;
- release on cancel: with ``ReleaseOnCancel: true`` (kube-scheduler sets it)
  client-go's ``release()`` writes the record with an empty
  ``holderIdentity``, ``leaseDurationSeconds: 1`` and acquire/renew times of
  now, keeping ``leaseTransitions``, so a standby takes over at its next
  retry instead of after the lease duration. :meth:`LeaderElector.release`
  writes the same, on the Lease's current resourceVersion and only while we
  are its holder.

It also tells who leads: ``on_holder`` is called with the Lease record's
``holderIdentity`` whenever the record read or written names another holder
than the last one seen ("" once released), so that a standby can say who
the leader is (``Core.leader``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import math
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from berth.adapters.kubernetes.backoff import Backoff, describe

__all__ = ["LeaderElector"]

log = logging.getLogger(__name__)

_TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


def _unavailable(e: BaseException) -> ApiException:
    """What the library expects from a failed GET: an ApiException with a
    Status body (it reads ``body["code"]`` to tell 404 from the rest)."""
    err = ApiException(status=503, reason=f"API server unreachable: {describe(e)}")
    err.body = json.dumps({"kind": "Status", "code": 503, "message": err.reason}).encode()
    return err


class _Lock(LeaseLock):
    """The library's LeaseLock, with every call bounded by ``timeout`` and a
    transport failure reported as a failed attempt instead of raised."""

    def __init__(self, name: str, namespace: str, identity: str, api: client.ApiClient, elector: LeaderElector) -> None:
        super().__init__(name, namespace, identity, api)
        self._elector = elector

    async def get(self, name: str, namespace: str) -> Any:
        el = self._elector
        while True:
            try:
                # asyncio.timeout, not wait_for: see update().
                async with asyncio.timeout(el.request_timeout):
                    found = await super().get(name, namespace)
            except _TRANSPORT_ERRORS as e:
                el.unanswered = True
                if el.leading:
                    # The leader must see the failure now: it has renewDeadline to renew.
                    return False, _unavailable(e)
                # A follower has nothing to lose by waiting: back off.
                await el.wait_for_api_server(e)
                continue
            el.reachable()
            el.unanswered = False
            ok, record = found
            if ok and record is not None:
                el.observed(getattr(record, "holder_identity", None) or "")
                el.check_usurped(record)
            return found

    async def create(self, name: str, namespace: str, election_record: Any) -> bool:
        try:
            async with asyncio.timeout(self._timeout):
                created = bool(await super().create(name, namespace, election_record))
        except _TRANSPORT_ERRORS as e:
            log.warning("leader election: creating Lease %s/%s failed: %s", namespace, name, describe(e))
            return False
        if created:
            self._elector.observed(election_record.holder_identity)
            self._elector.renewed()
        return created

    async def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a
            # cancellation that arrives as the call completes (cpython
            # gh-86296), and a leader told to stop would renew on.
            async with asyncio.timeout(self._timeout):
                updated = bool(await super().update(name, namespace, updated_record))
        except _TRANSPORT_ERRORS as e:
            log.warning("leader election: updating Lease %s/%s failed: %s", namespace, name, describe(e))
            self._elector.unanswered = True
            return False
        self._elector.unanswered = False
        if updated:
            self._elector.observed(updated_record.holder_identity)
            if updated_record.holder_identity == self._elector.identity:
                self._elector.renewed()
        return updated

    @property
    def _timeout(self) -> float:
        return self._elector.request_timeout


class LeaderElector:
    """Campaigns for the Lease until cancelled; runs ``lead()`` as a task
    while holding it; on cancellation ends the term, then releases the Lease."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float,
        renew_deadline: float,
        retry_period: float,
        lead: Callable[[], Coroutine[Any, Any, None]],
        on_holder: Callable[[str], None] | None = None,
        on_unanswered: Callable[[], object] | None = None,
    ) -> None:
        """``on_unanswered``: called when a term ends because the API server
        did not answer the renewals (timeouts, resets): the connections in
        use may be dead without a FIN or RST, and whatever else rides on them
        (the informers' watches) should move to fresh ones."""
        self.api = api
        self.name = name
        self.namespace = namespace
        self.identity = identity
        # Lease.spec.leaseDurationSeconds is an integer, and the library
        # renders this value with str() into it.
        self.lease_duration = math.ceil(lease_duration)
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        #: Each call on the Lease gives up after this (client-go bounds the
        #: renewal attempts by RenewDeadline).
        self.request_timeout = renew_deadline
        self._lead = lead
        self._on_holder = on_holder
        self._on_unanswered = on_unanswered
        #: The last call on the Lease failed without an answer (transport error or timeout).
        self.unanswered = False
        #: The Lease's holderIdentity as last read or written ("" released
        #: or not seen yet).
        self.holder = ""
        self._term: asyncio.Task[None] | None = None
        self._clock = asyncio.get_running_loop().time
        #: When we last acquired or renewed the Lease (monotonic; None: never).
        self._renewed_at: float | None = None
        self._ending: asyncio.Future[None] | None = None
        self._backoff = Backoff(clock=asyncio.get_running_loop().time)
        self._unreachable = False

    @property
    def leading(self) -> bool:
        return self._term is not None and not self._term.done()

    def observed(self, holder: str) -> None:
        """The Lease record names ``holder`` (read, or written by us)."""
        if holder == self.holder:
            return
        self.holder = holder
        log.info("leader election: Lease %s/%s held by %s", self.namespace, self.name, holder or "nobody")
        if self._on_holder is not None:
            self._on_holder(holder)

    # ------------------------------------------------------------ fencing
    #
    # client-go's leader keeps acting until a renewal has failed for
    # renewDeadline, and a leader paused (SIGSTOP, a frozen VM) resumes
    # believing it leads: kube-scheduler v1.37 binds for up to renewDeadline
    # after another replica took over. Berth is stricter: a write that
    # changes the cluster is refused once the last successful renewal is
    # older than renewDeadline (after a pause that is already so), and the
    # term ends as soon as a read of the Lease shows another holder.

    def renewed(self) -> None:
        self._renewed_at = self._clock()

    def fence(self) -> str | None:
        """Why this replica must not write as the leader now, or None."""
        if self._renewed_at is None:
            return "the Lease was never acquired"
        since = self._clock() - self._renewed_at
        if since > self.renew_deadline:
            return f"the Lease was last renewed {since:.1f}s ago (renewDeadline {self.renew_deadline:.0f}s)"
        return None

    def check_usurped(self, record: Any) -> None:
        """End the term at once when the Lease names another live holder."""
        holder = getattr(record, "holder_identity", None) or ""
        if self.leading and holder and holder != self.identity:
            log.warning("%s: the Lease is held by %s: ending the term now", self.identity, holder)
            self._renewed_at = None
            self._ending = asyncio.ensure_future(self._end_term())

    # ------------------------------------------------------------ reachability

    async def wait_for_api_server(self, e: BaseException) -> None:
        """One backoff step after a failed call, logged."""
        self._unreachable = True
        delay = self._backoff.next()
        why = describe(e)
        log.warning("leader election (%s): API server unreachable (%s); retrying in %.1fs", self.identity, why, delay)
        await asyncio.sleep(delay)

    def reachable(self) -> None:
        if self._unreachable:
            log.info("leader election (%s): the API server is reachable again", self.identity)
            self._unreachable = False

    # ------------------------------------------------------------ the term

    async def _start_term(self) -> None:
        self._term = asyncio.create_task(self._lead(), name="leader-term")

    async def _end_term(self) -> None:
        """Cancel the term and wait for it to wind down (its binding cycles),
        but not past ``renewDeadline``: a hung API server must not hold up
        a shutdown or the next campaign."""
        term, self._term = self._term, None
        if term is None:
            return
        term.cancel()
        done, _ = await asyncio.wait({term}, timeout=self.renew_deadline)
        if not done:
            log.warning("%s: the scheduling term did not stop within %.0fs", self.identity, self.renew_deadline)
            return
        with contextlib.suppress(asyncio.CancelledError, Exception):
            term.result()

    async def _lost(self) -> None:
        if self._term is not None:
            log.warning("%s lost the lease: scheduling stopped", self.identity)
            if self.unanswered and self._on_unanswered is not None:
                # kube-scheduler exits here and comes back with new
                # connections; Berth keeps its caches and replaces the connections.
                log.warning("%s: the API server did not answer: re-establishing the watches", self.identity)
                self._on_unanswered()
        await self._end_term()

    # ------------------------------------------------------------ run

    async def run(self) -> None:
        """Campaign, lead, campaign again after a lost term; until cancelled."""
        try:
            while True:
                lock = _Lock(self.name, self.namespace, self.identity, self.api, self)
                cfg = electionconfig.Config(
                    lock,
                    lease_duration=self.lease_duration,
                    renew_deadline=self.renew_deadline,
                    retry_period=self.retry_period,
                    onstarted_leading=self._start_term,
                    onstopped_leading=self._lost,
                )
                try:
                    await leaderelection.LeaderElection(cfg).run()
                except Exception:
                    log.exception("leader election failed; retrying")
                await self._end_term()
                await asyncio.sleep(self.retry_period)
        finally:
            held = self._term is not None
            await self._end_term()
            if held:
                await self.release()

    async def release(self) -> bool:
        """Give the Lease up if we still hold it (client-go ``release()``):
        an empty holderIdentity and a 1 s leaseDuration, written on the
        resourceVersion just read, so a holder that changed meanwhile is
        never overwritten. True when released."""
        coordination = client.CoordinationV1Api(self.api)
        try:
            lease = await coordination.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=self.request_timeout
            )
            # Any: the times below are written as strings, which the model's types do not allow.
            spec: Any = lease.spec
            if spec is None or spec.holder_identity != self.identity:
                log.info("Lease %s/%s is no longer ours: nothing to release", self.namespace, self.name)
                return False
            # metav1.MicroTime as client-go writes it: RFC3339 with exactly six
            # fraction digits (datetime.isoformat() drops them at .000000,
            # which the API server's RFC3339Micro parser refuses).
            now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            spec.holder_identity = ""
            spec.lease_duration_seconds = 1
            spec.acquire_time = now
            spec.renew_time = now
            # lease.metadata.resource_version makes this a compare-and-swap.
            await coordination.replace_namespaced_lease(
                self.name, self.namespace, lease, _request_timeout=self.request_timeout
            )
        except Exception as e:  # an API error, a refused connection, a timeout: the lease will expire instead
            log.warning("releasing Lease %s/%s failed: %s", self.namespace, self.name, describe(e))
            return False
        log.info("%s released Lease %s/%s", self.identity, self.namespace, self.name)
        self.observed("")
        return True
