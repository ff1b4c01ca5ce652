"""Standalone Berth's state in a :mod:`berth.store`: what is written there,
and how a restarted Berth carries on.

Written (the store commits in batches; :meth:`Durable.sync` waits)::

    the embedded cluster's objects   each dict of it (nodes, pods, ...) is a
                                     _Tracked dict: every assignment and pop
                                     is a put/delete of that kind and key,
                                     so feeds, bindings, nominations,
                                     evictions and cancels are all kept
                                     without each verb saying so
    submitted gangs                  kind ``pod_groups`` (the core keeps them,
                                     not the cluster's dict)
    Workload API groups, Queue       kinds ``scheduling_groups`` and
    objects                          ``queue_objects``: the core keeps them;
                                     the two places every change of them
                                     goes through (the GroupStore's put and
                                     remove, QueueObjects.commit) write too
    the decision log                 each decision with its serial
    the submit ledger                idempotency key -> the first outcome

Restored (:meth:`Durable.restore`), as kube-scheduler starts after a
restart — from what the API server holds, never from its own memory: the
objects are fed back through the embedded cluster in dependency order
(:meth:`~berth.cluster.embedded.EmbeddedCluster.load`), so a bound pod is
counted on its node (queue usage follows from it) and stays bound, and a
pod whose binding was not yet committed comes back pending and is queued
again (an assumed pod's reservation lives only in the cache, as upstream's).
No pod is placed twice: a binding is in the same commit as its decision,
and watchers see a decision only once it is committed (the log holds it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from berth.cluster import manifests, model, workload_api
from berth.cluster import queues as cluster_queues
from berth.cluster.embedded import EmbeddedCluster
from berth.errors import InvalidArgument
from berth.scheduling import batch
from berth.scheduling.core import Core
from berth.scheduling.decisions import DecisionLog
from berth.store import StateStore, codec

__all__ = ["MAX_SUBMIT_KEYS", "Durable", "Restored", "Resync"]

log = logging.getLogger(__name__)

#: Idempotency keys remembered (the oldest are forgotten first).
MAX_SUBMIT_KEYS = 100_000


class _Tracked(dict[Any, Any]):
    """A dict of the embedded cluster that tells the store about each change."""

    __slots__ = ("_key", "capture", "kind", "store")

    def __init__(self, kind: str, store: StateStore, items: dict[Any, Any]) -> None:
        super().__init__(items)
        self.kind = kind
        self.store = store
        #: The keys written while a resync runs (None otherwise).
        self.capture: set[Any] | None = None
        self._key = _workload_key if kind == codec.WORKLOADS else str

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.store.put(self.kind, self._key(key), value)
        if self.capture is not None:
            self.capture.add(key)

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        self.store.delete(self.kind, self._key(key))

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            self.store.delete(self.kind, self._key(key))
        return super().pop(key, *default)

    def popitem(self) -> tuple[Any, Any]:
        key, value = super().popitem()
        self.store.delete(self.kind, self._key(key))
        return key, value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        for key in list(self):
            del self[key]


def _workload_key(key: tuple[str, str]) -> str:
    return f"{key[0]} {key[1]}"


@dataclasses.dataclass(slots=True)
class Restored:
    """What :meth:`Durable.restore` found."""

    epoch: str
    created: bool
    objects: int
    pods: int
    bound: int
    decisions: int
    serial: int
    seconds: float


class Durable:
    """The embedded cluster, the decision log and the submit ledger, kept
    in ``store``; see the module docstring."""

    def __init__(self, store: StateStore, core: Core, cluster: EmbeddedCluster) -> None:
        self.store = store
        self.core = core
        self.cluster = cluster
        #: Idempotency key -> (pod, uid, message) of its first accepted Submit, oldest first.
        self.ledger: dict[str, tuple[str, str, str]] = {}
        self._keys_of_uid: dict[str, list[str]] = {}
        self._tracked: dict[str, _Tracked] = {}
        self.restored: Restored | None = None
        core.metrics.state_store_from(store.backend, lambda: int(getattr(store, "commits", 0)))

    @property
    def epoch(self) -> str:
        return self.store.epoch

    # ------------------------------------------------------------ start

    async def restore(self) -> Restored:
        """Open the store, feed back what it holds, then keep every change."""
        started = time.perf_counter()
        snap = await self.store.open()
        decisions: DecisionLog = self.core.decisions
        stored_pods = snap.objects.get("pods", {})
        uids = {key: pod.metadata.uid for key, pod in stored_pods.items() if isinstance(pod, model.Pod)}
        decisions.restore(snap.decisions, lambda key, uid: uids.get(key) == uid)
        decisions.epoch = snap.epoch
        # The decisions the reload itself makes (pods queued again) are kept too.
        self._keep_decisions()
        objs = manifests.Manifests()
        queue_objects: list[cluster_queues.Queue] = []
        for kind, by_key in snap.objects.items():
            if kind == codec.SUBMITS:
                for key, first in by_key.items():
                    self._remember(key, first)  # type: ignore[arg-type]
            elif kind == codec.QUEUE_OBJECTS:
                queue_objects.extend(by_key.values())  # type: ignore[arg-type]
            elif kind == codec.WORKLOADS:
                objs.workloads.extend(by_key.values())  # type: ignore[arg-type]
            elif kind == "claim_templates":
                objs.resource_claim_templates.extend(by_key.values())  # type: ignore[arg-type]
            else:
                getattr(objs, kind).extend(by_key.values())
        # What the store holds passed validation when it was fed, and decodes
        # into the typed model (codec): not validated again.
        self.cluster.load(objs, validated=True)
        for obj in queue_objects:  # judged again, one by one, as when they were fed
            self.core.on_queue_object(obj)
        self._keep_objects()
        self._keep_core_objects()
        bound = sum(1 for p in stored_pods.values() if isinstance(p, model.Pod) and p.spec.node_name)
        self.restored = Restored(
            snap.epoch,
            snap.created,
            sum(len(v) for k, v in snap.objects.items() if k != codec.SUBMITS),
            len(stored_pods),
            bound,
            len(snap.decisions),
            decisions.serial,
            time.perf_counter() - started,
        )
        return self.restored

    def _keep_objects(self) -> None:
        """From now on every change of the cluster is written."""
        store, cluster = self.store, self.cluster
        for kind in (*codec.KINDS, codec.WORKLOADS):
            current = getattr(cluster, kind, None)
            if isinstance(current, dict) and not isinstance(current, _Tracked):
                tracked = self._tracked[kind] = _Tracked(kind, store, {})
                dict.update(tracked, current)  # already stored: not written again
                setattr(cluster, kind, tracked)

    def _keep_core_objects(self) -> None:
        """From now on every Workload API group and Queue object change is written."""
        store, groups, queues = self.store, self.core.scheduling_groups, self.core.queue_objects
        put, remove, commit = groups.put, groups.remove, queues.commit

        def put_group(obj: workload_api.PodGroup | workload_api.Workload) -> None:
            put(obj)
            key = f"{obj.kind} {model.pod_key(obj.metadata.namespace, obj.metadata.name)}"
            store.put(codec.SCHEDULING_GROUPS, key, obj)

        def remove_group(kind: str, namespace: str, name: str) -> None:
            remove(kind, namespace, name)
            store.delete(codec.SCHEDULING_GROUPS, f"{kind} {model.pod_key(namespace, name)}")

        def commit_queues(p: Any, objects: Any = None) -> None:
            before = queues.objects
            commit(p, objects)
            if objects is None:  # the file's queues reloaded: the objects are the same
                return
            for name in before.keys() - queues.objects.keys():
                store.delete(codec.QUEUE_OBJECTS, name)
            for name, obj in queues.objects.items():
                if before.get(name) is not obj:
                    store.put(codec.QUEUE_OBJECTS, name, obj)

        groups.put = put_group  # type: ignore[method-assign]
        groups.remove = remove_group  # type: ignore[method-assign]
        queues.commit = commit_queues  # type: ignore[method-assign]

    def _keep_decisions(self) -> None:
        """From now on every decision is written (and, with a durable
        store, shown to watchers once committed)."""
        store = self.store
        decisions: DecisionLog = self.core.decisions
        decisions.record = store.append_decision
        decisions.trimmed = store.trim_decisions
        if store.backend != "memory":
            decisions.hold = True
            store.on_durable = decisions.publish

    async def sync(self) -> None:
        """Everything changed so far is durable (one commit for all of it)."""
        await self.store.sync()

    async def close(self) -> None:
        await self.store.close()

    # ------------------------------------------------------------ Submit, Cancel

    def submit(
        self,
        pods: Sequence[model.Pod],
        group: model.PodGroup | None = None,
        *,
        keys: Sequence[str] = (),
        paths: Sequence[str] | None = None,
    ) -> list[batch.SubmitResult]:
        """:func:`batch.submit` with an idempotency key per pod (``keys[i]``,
        default the pod's uid, itself defaulted from its namespace and name):
        a key already accepted answers its first outcome again and submits
        nothing. Refusals are not remembered: a refused pod may be corrected
        and sent again under the same key."""
        if keys and len(keys) != len(pods):
            raise InvalidArgument(f"idempotency_keys: {len(keys)} keys for {len(pods)} pods: give one per pod, or none")
        out: list[batch.SubmitResult | None] = []
        fresh: list[model.Pod] = []
        fresh_paths: list[str] = []
        fresh_keys: list[str] = []
        seen: dict[str, int] = {}
        for i, pod in enumerate(pods):
            at = paths[i] if paths is not None else f"pods[{i}]"
            md = pod.metadata
            key = (keys[i] if keys else "") or md.uid or manifests.default_uid(md.namespace or "default", md.name)
            first = self.ledger.get(key)
            if first is not None:
                out.append(batch.SubmitResult(first[0], first[1], True, first[2]))
                continue
            j = seen.setdefault(key, i)
            if j != i:
                out.append(
                    batch.SubmitResult(
                        pod.key,
                        message=f"{at}: idempotency key {key!r} is also pod {j}'s in this request",
                        reason=batch.INVALID,
                    )
                )
                continue
            out.append(None)
            fresh.append(pod)
            fresh_paths.append(at)
            fresh_keys.append(key)
        judged = iter(batch.submit(self.core, fresh, group, paths=fresh_paths))
        results: list[batch.SubmitResult] = []
        keys_of = iter(fresh_keys)
        for r in out:
            if r is None:
                r = next(judged)
                key = next(keys_of)
                if r.accepted:
                    self._remember(key, (r.pod, r.uid, r.message))
                    self.store.put(codec.SUBMITS, key, (r.pod, r.uid, r.message))
            results.append(r)
        if group is not None and any(r.accepted for r in results):
            # The core keeps submitted gangs (not the cluster's dict): kept here.
            self.store.put("pod_groups", model.pod_key(group.metadata.namespace, group.metadata.name), group)
        return results

    def cancel(self, namespace: str, name: str) -> batch.CancelResult:
        """:func:`batch.cancel`; a cancelled pod's idempotency keys are
        forgotten, so submitting it again creates it again."""
        pod = self.core.pods.by_key(model.pod_key(namespace or "default", name))
        res = batch.cancel(self.core, namespace, name)
        if res.cancelled and pod is not None:
            for key in self._keys_of_uid.pop(pod.metadata.uid, ()):
                if self.ledger.pop(key, None) is not None:
                    self.store.delete(codec.SUBMITS, key)
        return res

    def _remember(self, key: str, first: tuple[str, str, str]) -> None:
        self.ledger[key] = first
        self._keys_of_uid.setdefault(first[1], []).append(key)
        while len(self.ledger) > MAX_SUBMIT_KEYS:
            old = next(iter(self.ledger))
            _, uid, _ = self.ledger.pop(old)
            keys = self._keys_of_uid.get(uid)
            if keys is not None and old in keys:
                keys.remove(old)
                if not keys:
                    del self._keys_of_uid[uid]
            self.store.delete(codec.SUBMITS, old)

    # ------------------------------------------------------------ resync

    @contextlib.contextmanager
    def resync(self, kind: str) -> Iterator[Resync]:
        """Make the cluster's ``kind`` exactly what the upsert run inside
        the block writes: on success, every object of that kind it did not
        write is deleted (through the cluster's ``delete_<kind>``, as a
        feeder's delete would be). A refused upsert deletes nothing."""
        tracked = self._tracked.get(kind)
        delete = getattr(self.cluster, f"delete_{kind}", None)
        if tracked is None or delete is None:
            raise InvalidArgument(f"resync: not supported for {kind.replace('_', ' ')}")
        before = set(tracked)
        tracked.capture = set()
        result = Resync()
        try:
            yield result
            gone = before - tracked.capture
        finally:
            tracked.capture = None
        if gone:
            result.deleted = delete(sorted(gone))


@dataclasses.dataclass(slots=True)
class Resync:
    """What a resync deleted (set when its block ends)."""

    deleted: int = 0
