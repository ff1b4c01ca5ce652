"""GangIndex: which gang each pod is in, under the enabled dialects, and the
PodGroup objects that define gangs.

The core keeps it current (:meth:`pod_changed`, :meth:`pod_removed`,
:meth:`put_group`, :meth:`remove_group`); Coscheduling, the queues and the
views read it. A pod two enabled dialects claim, or whose key is malformed,
is in no gang: :meth:`member_of` raises :class:`InvalidGang` for it, and
Coscheduling holds it at PreEnqueue with that message.

The Workload API's groups (``workload-api``) live in
:class:`berth.cluster.workload_api.GroupStore`, which the index reads
(:attr:`GangIndex.workload_groups`) rather than copies.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from berth import features
from berth.cluster import model, workload_api
from berth.gangs.model import Gang, GangKey, InvalidGang, Membership, PhaseCounts
from berth.gangs.sources import SOURCES, WORKLOAD_API, GangSource, workload_gang_key, workload_group_key

__all__ = ["GangIndex", "validate_sources"]


def validate_sources(names: Iterable[str]) -> list[str]:
    """The names, checked against the registry; raises ValueError naming an unknown one."""
    out: list[str] = []
    for i, name in enumerate(names):
        if name not in SOURCES:
            known = ", ".join(SOURCES)
            raise ValueError(f"[{i}]: unknown gang source {name!r} (known: {known})")
        if name in out:
            raise ValueError(f"[{i}]: {name!r} is listed twice")
        out.append(name)
    return out


class GangIndex:
    """See the module docstring. ``sources``: the enabled dialects, by name
    (default: every one in :data:`berth.gangs.sources.SOURCES`);
    ``workload_groups``: the Workload API's store, given where the
    ``GenericWorkload`` gate is on (without it ``workload-api`` claims no pod,
    as GangScheduling is then not run)."""

    def __init__(
        self, sources: Sequence[str] | None = None, *, workload_groups: workload_api.GroupStore | None = None
    ) -> None:
        names = validate_sources(SOURCES if sources is None else sources)
        self.sources: tuple[GangSource, ...] = tuple(SOURCES[n] for n in names)
        self.workload_groups = workload_groups
        self._by_api = {s.api_version: s for s in self.sources if s.api_version}
        #: (apiVersion, namespace, name) -> PodGroup.
        self._groups: dict[tuple[str, str, str], model.PodGroup] = {}
        #: uid -> (membership, pod); gang -> member uids.
        self._member: dict[str, tuple[Membership, model.Pod]] = {}
        self._members: dict[GangKey, dict[str, model.Pod]] = {}
        #: Built gangs, dropped when a member or the group changes.
        self._built: dict[GangKey, Gang | InvalidGang | None] = {}

    # ------------------------------------------------------------ membership

    def member_of(self, pod: model.Pod) -> Membership | None:
        """The pod's gang under the enabled dialects; None: in none. Raises
        InvalidGang for a malformed key or a pod two dialects claim."""
        found: list[Membership] = []
        version = self.version
        for source in self.sources:
            if source.name == WORKLOAD_API and self.workload_groups is None:
                continue
            try:
                m = source.member(pod, version)
            except InvalidGang as e:
                raise InvalidGang(f"{source.name}: {e}") from None
            if m is not None:
                found.append(m)
        if len(found) > 1:
            claims = " and ".join(f'{m.key.source} (group "{m.key.name}")' for m in found)
            raise InvalidGang(f"pod is claimed by two gang sources, {claims}: remove one dialect's keys")
        return found[0] if found else None

    @property
    def version(self) -> features.KubeVersion:
        """The release whose pod fields name a Workload API group."""
        return self.workload_groups.version if self.workload_groups is not None else features.NEWEST

    def claims(self, source: str) -> bool:
        """Whether ``source`` is enabled and able to claim pods here."""
        if source == WORKLOAD_API and self.workload_groups is None:
            return False
        return any(s.name == source for s in self.sources)

    def pod_changed(self, pod: model.Pod) -> None:
        uid = pod.metadata.uid
        try:
            m = self.member_of(pod)
        except InvalidGang:
            m = None
        old = self._member.pop(uid, None)
        if old is not None:
            self._drop(old[0].key, uid)
        if m is None:
            return
        self._member[uid] = (m, pod)
        self._members.setdefault(m.key, {})[uid] = pod
        self._built.pop(m.key, None)

    def pod_removed(self, pod: model.Pod) -> None:
        old = self._member.pop(pod.metadata.uid, None)
        if old is not None:
            self._drop(old[0].key, pod.metadata.uid)

    def _drop(self, key: GangKey, uid: str) -> None:
        members = self._members.get(key)
        if members is not None:
            members.pop(uid, None)
            if not members:
                del self._members[key]
        self._built.pop(key, None)

    def members(self, key: GangKey) -> list[model.Pod]:
        """The gang's members, neither terminal nor terminating (as scheduler-plugins counts them)."""
        return [
            p
            for p in self._members.get(key, {}).values()
            if p.status.phase not in ("Succeeded", "Failed") and not p.metadata.deletion_timestamp
        ]

    def keys(self) -> list[GangKey]:
        """Every gang that has a member or a PodGroup, sorted."""
        out = set(self._members)
        for api, ns, name in self._groups:
            source = self._by_api.get(api)
            if source is not None:
                out.add(GangKey(source.name, ns, name))
        if self.workload_groups is not None and self.claims(WORKLOAD_API):
            for pg in self.workload_groups.pod_groups():
                out.add(workload_gang_key(workload_api.GroupKey(pg.metadata.namespace, pg.metadata.name)))
        return sorted(out)

    # ------------------------------------------------------------ PodGroup objects

    def put_group(self, group: model.PodGroup) -> GangKey | None:
        """Store a PodGroup; returns the gang it defines (None: its dialect is off)."""
        ns = group.metadata.namespace or "default"
        self._groups[(group.api_version, ns, group.metadata.name)] = group
        return self._touch(group.api_version, ns, group.metadata.name)

    def remove_group(self, api_version: str, namespace: str, name: str) -> GangKey | None:
        self._groups.pop((api_version, namespace or "default", name), None)
        return self._touch(api_version, namespace or "default", name)

    def _touch(self, api_version: str, namespace: str, name: str) -> GangKey | None:
        source = self._by_api.get(api_version)
        if source is None:
            return None
        key = GangKey(source.name, namespace, name)
        self._built.pop(key, None)
        return key

    def pod_group(self, api_version: str, namespace: str, name: str) -> model.PodGroup | None:
        return self._groups.get((api_version, namespace or "default", name))

    def group_of(self, key: GangKey) -> model.PodGroup | None:
        """The PodGroup object that defines ``key`` (None: its dialect has none, or not yet)."""
        source = SOURCES.get(key.source)
        if source is None or not source.api_version:
            return None
        return self.pod_group(source.api_version, key.namespace, key.name)

    def workload_gang(self, key: GangKey) -> workload_api.Gang | None:
        """The Workload API group behind a ``workload-api`` key (None: unknown)."""
        if self.workload_groups is None:
            return None
        return self.workload_groups.gang(workload_group_key(key))

    # ------------------------------------------------------------ gangs

    def gang(self, key: GangKey) -> Gang | None:
        """The gang as its dialect defines it now; None while its definition
        is missing (:meth:`missing` says what); raises InvalidGang."""
        if key.source == WORKLOAD_API:  # read from its store, which changes without telling the index
            return SOURCES[WORKLOAD_API].build(key, self)
        hit = self._built.get(key, self)
        if hit is self:
            source = SOURCES[key.source]
            try:
                hit = source.build(key, self)
            except InvalidGang as e:
                hit = e
            self._built[key] = hit
        if isinstance(hit, InvalidGang):
            raise hit
        return hit  # type: ignore[return-value]

    def missing(self, key: GangKey) -> str:
        """Why :meth:`gang` is None: ``its PodGroup is not found``."""
        return SOURCES[key.source].missing

    def phase(self, gang: Gang, counts: PhaseCounts, *, admissible: bool) -> str | None:
        """The ``status.phase`` the gang's PodGroup should have (None: its dialect has none)."""
        fn = SOURCES[gang.key.source].phase
        return fn(gang, counts, admissible) if fn is not None else None

    def queue_of(self, pod: model.Pod) -> str:
        """The queue the pod's PodGroup names (Volcano's, KAI's ``spec.queue``); "" for none."""
        try:
            m = self.member_of(pod)
            gang = self.gang(m.key) if m is not None else None
        except InvalidGang:
            return ""
        return gang.queue if gang is not None else ""

    def task_of(self, pod: model.Pod) -> str:
        hit = self._member.get(pod.metadata.uid)
        if hit is not None:
            return hit[0].task
        try:
            m = self.member_of(pod)
        except InvalidGang:
            return ""
        return m.task if m is not None else ""
