"""The Handle's ClusterClient: acts on each pod (and ResourceClaim) through
the source that owns it.

Background work (evictions, nominations, FailedScheduling reports) runs as
tracked tasks, so shutdown and tests can wait for it (:meth:`drain`) and
nothing is left running behind them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Coroutine
from typing import Any

import msgspec

from berth.cluster import dra, model
from berth.cluster.sources import BindError, BindRetriable, Conflict, EventType, Source, check_event
from berth.errors import NotFound
from berth.framework import interface as fw
from berth.scheduling import feeding
from berth.scheduling.dra_state import DraStore
from berth.scheduling.state import PodStore

__all__ = ["DEFAULT_BACKOFF", "Backoff", "SourceClient"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Backoff:
    """client-go's ``wait.Backoff`` as ``retry.OnError`` uses it: at most
    ``steps`` tries, the k-th wait ``duration * factor**k``, each lengthened
    by up to ``jitter`` of itself (``wait.Jitter``)."""

    steps: int
    duration: float
    factor: float
    jitter: float

    def delays(self, rng: random.Random) -> list[float]:
        """The waits between the tries (``Backoff.Step``, ``backoff.go``)."""
        out, d = [], self.duration
        for _ in range(self.steps - 1):
            out.append(d + rng.random() * self.jitter * d if self.jitter > 0 else d)
            d *= self.factor
        return out


#: ``retry.DefaultBackoff`` (``k8s.io/client-go/util/retry/util.go`` v0.37.2).
DEFAULT_BACKOFF = Backoff(steps=4, duration=0.010, factor=5.0, jitter=0.1)


class SourceClient:
    def __init__(
        self, pods: PodStore, dra_store: DraStore | None = None, *, bind_backoff: Backoff | None = None
    ) -> None:
        self._pods = pods
        self._dra = dra_store if dra_store is not None else DraStore()
        #: How a Binding the API server may take if asked again is retried
        #: (``util.BindPod``, v1.37); None: it is not.
        self.bind_backoff = bind_backoff
        self._rng = random.Random()
        #: The source of pods no source has claimed (the extender's Bind of a
        #: pod Berth never saw): the embedded cluster, or the API server.
        self.default_source: Source | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        #: Large feed batches in progress: a bind waits for one to end (its
        #: checks were made against the state without this bind).
        self.feeding = feeding.FeedGate()

    def source_of(self, pod: model.Pod) -> Source | None:
        return self._pods.source_of(pod.metadata.uid) or self.default_source

    # ------------------------------------------------------------ ClusterClient

    async def bind(self, pod: model.Pod, node: str) -> fw.Status:
        """The Binding; from 1.37 one the API server may take if asked
        again is retried with :attr:`bind_backoff` (``util.BindPod``,
        ``pkg/scheduler/util/utils.go`` v1.37.2: ``retry.OnError(retry.DefaultBackoff,
        Retriable, ...)``), the last error returned when every try failed."""
        source = self.source_of(pod)
        if source is None:
            return fw.Status.error(f"no source owns pod {pod.key}")
        delays = self.bind_backoff.delays(self._rng) if self.bind_backoff is not None else []
        while True:
            try:
                await self.feeding.quiet()
                await source.bind(pod, node)
            except BindRetriable as e:
                if not delays:
                    return fw.Status.error(str(e))
                await asyncio.sleep(delays.pop(0))
            except BindError as e:
                return fw.Status.error(str(e))
            else:
                return fw.SUCCESS

    def evict(self, pod: model.Pod, reason: str) -> None:
        source = self.source_of(pod)
        if source is not None:
            self.spawn(self._when_quiet(source.evict(pod, reason)), f"evict {pod.key}")

    def nominate(self, pod: model.Pod, node: str) -> None:
        source = self.source_of(pod)
        if source is not None:
            self.spawn(self._when_quiet(source.nominate(pod, node)), f"nominate {pod.key} to {node!r}")

    async def _when_quiet(self, write: Coroutine[Any, Any, None]) -> None:
        """``write`` once no feed batch is being applied (as :meth:`bind`)."""
        try:
            await self.feeding.quiet()
        except BaseException:
            write.close()  # never started
            raise
        await write

    async def nominate_now(self, pod: model.Pod, node: str) -> None:
        """:meth:`nominate`, done before returning (the binding cycle's
        ``updatePod``); a failure is logged, not raised, as upstream
        carries on with the binding."""
        source = self.source_of(pod)
        if source is None:
            return
        try:
            await source.nominate(pod, node)
        except Exception as e:
            log.warning("setting nominatedNodeName of %s to %s: %s", pod.key, node, e)

    def report_preempted(self, pod: model.Pod, message: str) -> None:
        source = self.source_of(pod)
        if source is not None:
            self.spawn(source.report_preempted(pod, message), f"report {pod.key} preempted")

    def record_event(
        self,
        regarding: model.Pod,
        related: model.Pod | None,
        type_: EventType,
        reason: str,
        action: str,
        note: str,
    ) -> None:
        checked = check_event(type_, reason, action)
        source = self.source_of(regarding)
        if source is not None:
            write = source.record_event(regarding, related, checked, reason, action, note)
            self.spawn(write, f"event {reason} of {regarding.key}")

    # ------------------------------------------------------------ ResourceClaims

    def _claim_source(self, namespace: str, name: str) -> Source:
        source = self._dra.source_of(model.pod_key(namespace, name)) or self.default_source
        if source is None:
            raise NotFound(f"no source owns resourceclaim {namespace}/{name}")
        return source

    async def get_claim(self, namespace: str, name: str) -> dra.ResourceClaim:
        return await self._claim_source(namespace, name).get_claim(namespace, name)

    async def update_claim(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        md = claim.metadata
        return await self._claim_source(md.namespace, md.name).update_claim(claim)

    async def update_claim_status(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        md = claim.metadata
        return await self._claim_source(md.namespace, md.name).update_claim_status(claim)

    def unreserve_claim(self, claim: dra.ResourceClaim, pod_uid: str) -> None:
        self.spawn(self._unreserve(claim, pod_uid), f"unreserve resourceclaim {claim.key}")

    async def _unreserve(self, claim: dra.ResourceClaim, pod_uid: str) -> None:
        """Upstream's Unreserve patches ``{"$patch": "delete", "uid": ...}`` into
        reservedFor, which needs no current object; here: read, drop the pod,
        write, again on a conflict (client-go's retry.DefaultRetry: 5 tries)."""
        md = claim.metadata
        for _ in range(5):
            current = await self.get_claim(md.namespace, md.name)
            if current.metadata.uid != md.uid:
                return
            kept = [r for r in current.status.reserved_for if r.uid != pod_uid]
            if len(kept) == len(current.status.reserved_for):
                return
            status = msgspec.structs.replace(current.status, reserved_for=kept)
            try:
                await self.update_claim_status(msgspec.structs.replace(current, status=status))
            except Conflict:
                continue
            return
        log.warning("unreserve resourceclaim %s: conflicts on every try", claim.key)

    def deallocate_claim(self, claim: dra.ResourceClaim) -> None:
        # dynamicresources.go PostFilter: allocation, reservedFor and the drivers' device status go.
        status = msgspec.structs.replace(claim.status, allocation=None, reserved_for=[], devices=[])
        self.spawn(
            self._write_status(msgspec.structs.replace(claim, status=status)),
            f"deallocate resourceclaim {claim.key}",
        )

    async def _write_status(self, claim: dra.ResourceClaim) -> None:
        await self.update_claim_status(claim)

    async def create_claim(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        # DynamicResources' claim for extended resources: its pod's source owns it.
        source = self.default_source
        owner = next((r.uid for r in claim.metadata.owner_references if r.controller), "")
        if owner:
            source = self._pods.source_of(owner) or source
        if source is None:
            raise NotFound(f"no source to create resourceclaim in namespace {claim.metadata.namespace}")
        return await source.create_claim(claim)

    def delete_claim(self, claim: dra.ResourceClaim) -> None:
        self.spawn(self._delete_claim(claim), f"delete resourceclaim {claim.key}")

    async def _delete_claim(self, claim: dra.ResourceClaim) -> None:
        """deleteClaim (extendeddynamicresources.go v1.37.2): the builtin
        finalizer goes in an update (retried on conflict), then the delete."""
        md = claim.metadata
        source = self._claim_source(md.namespace, md.name)
        for _ in range(5):
            try:
                current = await source.get_claim(md.namespace, md.name)
            except NotFound:
                return
            if dra.DELETE_PROTECTION_FINALIZER not in current.metadata.finalizers:
                break
            kept = [f for f in current.metadata.finalizers if f != dra.DELETE_PROTECTION_FINALIZER]
            try:
                await source.update_claim(
                    msgspec.structs.replace(
                        current, metadata=msgspec.structs.replace(current.metadata, finalizers=kept)
                    )
                )
            except Conflict:
                continue
            break
        await source.delete_claim(md.namespace, md.name)

    async def set_extended_resource_claim_status(
        self, pod: model.Pod, status: model.PodExtendedResourceClaimStatus
    ) -> None:
        source = self.source_of(pod)
        if source is None:
            raise NotFound(f"no source owns pod {pod.key}")
        await source.set_extended_resource_claim_status(pod, status)

    # ------------------------------------------------------------ reports

    def report_unschedulable(self, pod: model.Pod, message: str, nominated: str | None = None) -> None:
        source = self._pods.source_of(pod.metadata.uid)
        if source is not None:
            self.spawn(source.report_unschedulable(pod, message, nominated), f"report {pod.key}")

    async def report_scheduled(self, pod: model.Pod, node: str) -> None:
        source = self._pods.source_of(pod.metadata.uid)
        if source is not None:
            try:
                await source.report_scheduled(pod, node)
            except Exception as e:  # an event that failed to post changes nothing scheduled
                log.warning("reporting %s scheduled on %s: %s", pod.key, node, e)

    # ------------------------------------------------------------ tasks

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed: %s", task.get_name(), task.exception())

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def cancel(self) -> None:
        for t in list(self._tasks):
            t.cancel()
