"""Volcano ``HyperNode`` objects (``topology.volcano.sh/v1alpha1``) and the
tiers they give each node.

The wire shape is volcano-sh/apis ``pkg/apis/topology/v1alpha1/hypernode_types.go``
(commit 536f121f): ``spec.tier``, ``spec.tierName``, ``spec.members[]`` of
``type`` Node or HyperNode, each with a ``selector`` of exactly one of
``exactMatch{name}``, ``regexMatch{pattern}``, ``labelMatch`` (a
LabelSelector). A HyperNode's nodes are its Node members' nodes plus its
HyperNode members' nodes, transitively (volcano-sh/volcano
``pkg/scheduler/api/hyper_node_info.go`` ``BuildHyperNodeCache``, commit
ed72c7c8).

:class:`HyperNodeSet` turns them into label-shaped levels: each node gets,
per tier, the one HyperNode of that tier that holds it, as the synthetic
label ``topology.volcano.sh/tier-<N>: <hypernode>``; the node table's label
columns read these for nodes that do not carry the key themselves
(:class:`berth.cache.table.DerivedLabels`), so a domain of tier N is "the
nodes of one tier-N HyperNode". A HyperNode that Volcano would refuse or
that would give a node two names in one tier is left out with a logged
reason, never a crash (:meth:`HyperNodeSet.left_out`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping

import msgspec

from berth.cluster import labels, model
from berth.errors import InvalidArgument

__all__ = [
    "API_VERSION",
    "KIND",
    "TIER_LABEL_PREFIX",
    "TOPOLOGY_NAME",
    "ExactMatch",
    "HyperNode",
    "HyperNodeSet",
    "HyperNodeSpec",
    "MemberSelector",
    "MemberSpec",
    "RegexMatch",
    "check",
    "tier_label",
    "tier_of_label",
]

log = logging.getLogger(__name__)

KIND = "HyperNode"
API_VERSION = "topology.volcano.sh/v1alpha1"
GROUP, _, VERSION = API_VERSION.partition("/")
PLURAL = "hypernodes"
#: The synthetic node label of tier N is this prefix + N.
TIER_LABEL_PREFIX = "topology.volcano.sh/tier-"
#: The topology the HyperNodes make (levels: highest tier first, tier 1, the host).
TOPOLOGY_NAME = "volcano-hypernodes"
MEMBER_NODE = "Node"
MEMBER_HYPERNODE = "HyperNode"


def tier_label(tier: int) -> str:
    return f"{TIER_LABEL_PREFIX}{tier}"


def tier_of_label(label: str) -> int | None:
    """The tier a synthetic label names, None for any other label."""
    rest = label.removeprefix(TIER_LABEL_PREFIX)
    return int(rest) if rest != label and rest.isdigit() else None


class ExactMatch(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    name: str = ""


class RegexMatch(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pattern: str = ""


class MemberSelector(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: model.LabelSelector | None = None


class MemberSpec(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    type: str = ""
    selector: MemberSelector = msgspec.field(default_factory=MemberSelector)


class HyperNodeSpec(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    tier: int = 0
    tier_name: str = ""
    members: list[MemberSpec] = []


class HyperNode(msgspec.Struct, kw_only=True, rename="camel"):
    """One cluster-scoped HyperNode object."""

    api_version: str = API_VERSION
    kind: str = KIND
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: HyperNodeSpec = msgspec.field(default_factory=HyperNodeSpec)


class _Checked:
    """A HyperNode that passed Volcano's admission checks, its selectors compiled."""

    __slots__ = ("children", "exact", "name", "regexes", "selectors", "tier", "tier_name")

    def __init__(self, obj: HyperNode) -> None:
        self.name = obj.metadata.name
        self.tier = obj.spec.tier
        self.tier_name = obj.spec.tier_name
        self.exact: list[str] = []
        self.regexes: list[re.Pattern[str]] = []
        self.selectors: list[model.LabelSelector] = []
        self.children: list[str] = []
        for i, member in enumerate(obj.spec.members):
            self._member(i, member)

    def _member(self, i: int, member: MemberSpec) -> None:
        """Volcano's admission: the CRD enum (type Node or HyperNode) and
        ValidatingAdmissionPolicy ``installer/helm/chart/volcano/policy/
        hypernodes-validating.yaml`` (exactly one selector kind, a non-empty
        name or pattern), the webhook ``pkg/webhooks/admission/hypernodes/
        validate/admit_hypernode.go`` (the pattern compiles)."""
        where = f"spec.members[{i}]"
        sel = member.selector
        kinds = [k for k in (sel.exact_match, sel.regex_match, sel.label_match) if k is not None]
        if member.type not in (MEMBER_NODE, MEMBER_HYPERNODE):
            raise InvalidArgument(f"{where}.type: {member.type!r} must be Node or HyperNode")
        if len(kinds) != 1:
            raise InvalidArgument(f"{where}.selector: must have exactly one of exactMatch, regexMatch, labelMatch")
        if sel.exact_match is not None:
            if not sel.exact_match.name:
                raise InvalidArgument(f"{where}.selector.exactMatch.name: member exactMatch name is required")
            (self.exact if member.type == MEMBER_NODE else self.children).append(sel.exact_match.name)
        elif member.type == MEMBER_HYPERNODE:
            # Volcano: "HyperNode member does not support regex match" (exactMatchMember): skipped.
            return
        elif sel.regex_match is not None:
            if not sel.regex_match.pattern:
                raise InvalidArgument(f"{where}.selector.regexMatch.pattern: member regexMatch pattern is required")
            try:
                self.regexes.append(re.compile(sel.regex_match.pattern))
            except re.error as e:
                raise InvalidArgument(
                    f"{where}.selector.regexMatch.pattern: member regexMatch pattern is invalid: {e}"
                ) from None
        elif sel.label_match is not None:
            labels.validate_label_selector(sel.label_match, f"{where}.selector.labelMatch")
            if sel.label_match.match_labels or sel.label_match.match_expressions:
                # Volcano's GetMembers: an empty labelMatch selects no node.
                self.selectors.append(sel.label_match)

    def selects(self, name: str, node_labels: Mapping[str, str]) -> bool:
        """Whether one of the Node members selects this node (GetMembers)."""
        return (
            name in self.exact
            or any(r.search(name) for r in self.regexes)  # Go's MatchString: unanchored
            or any(labels.match_label_selector(s, node_labels) for s in self.selectors)
        )

    def select(self, nodes: Mapping[str, Mapping[str, str]], by_label: _LabelIndex) -> set[str]:
        """The names of ``nodes`` (name -> labels) its Node members select."""
        out = {n for n in self.exact if n in nodes}
        for r in self.regexes:
            out.update(n for n in nodes if r.search(n))
        for sel in self.selectors:
            candidates: Iterable[str] = nodes
            if sel.match_labels:
                candidates = by_label.names(*next(iter(sel.match_labels.items())))
            out.update(n for n in candidates if labels.match_label_selector(sel, nodes[n]))
        return out


class _LabelIndex:
    """Node names by one label's value, built per key on first use."""

    def __init__(self, nodes: Mapping[str, Mapping[str, str]]) -> None:
        self._nodes = nodes
        self._by: dict[str, dict[str, list[str]]] = {}

    def names(self, key: str, value: str) -> list[str]:
        by = self._by.get(key)
        if by is None:
            by = self._by[key] = {}
            for name, node_labels in self._nodes.items():
                if (v := node_labels.get(key)) is not None:
                    by.setdefault(v, []).append(name)
        return by.get(value, [])


def check(obj: HyperNode) -> None:
    """Raise InvalidArgument (the field path and Volcano's message) for a
    HyperNode Volcano's admission would refuse."""
    _check(obj)


def _check(obj: HyperNode) -> _Checked:
    if obj.spec.tier < 0:
        raise InvalidArgument(f"spec.tier: {obj.spec.tier} must be at least 0")
    if not obj.spec.members:
        raise InvalidArgument("spec.members: member must have at least one member")
    return _Checked(obj)


class HyperNodeSet:
    """The HyperNodes read from the cluster, and the tier labels they give
    the nodes (:meth:`compute`). ``version`` moves whenever an object is
    added, changed or removed: the node table rebuilds its label columns."""

    def __init__(self) -> None:
        self.version = 0
        self._checked: dict[str, _Checked] = {}
        #: Refused on their own (admission) or by the tree (cycles, parents, tiers).
        self._refused: dict[str, str] = {}
        self._tree: dict[str, _Checked] = {}
        self._parent: dict[str, str] = {}
        self._tree_refused: dict[str, str] = {}
        #: Left out by the last compute for giving a node two names in one tier.
        self._conflicts: dict[str, str] = {}
        #: What was last logged, so each reason is logged once.
        self._reported: dict[str, str] = {}
        # Which nodes each HyperNode's Node members select, kept as nodes
        # and HyperNodes change (a node is matched when it is new or its
        # labels change; a HyperNode over all nodes when it is put).
        self._members: dict[str, set[str]] = {}
        self._containers: dict[str, set[str]] = {}
        self._dirty: set[str] = set()
        self._seen: dict[str, Mapping[str, str]] = {}
        self._out: dict[str, dict[str, str]] | None = None

    def __len__(self) -> int:
        return len(self._checked) + len(self._refused)

    def put(self, obj: HyperNode) -> None:
        name = obj.metadata.name
        self._forget(name)
        try:
            self._checked[name] = _check(obj)
            self._dirty.add(name)
        except InvalidArgument as e:
            self._refused[name] = str(e)
        self._rebuild()

    def remove(self, name: str) -> bool:
        if name not in self._checked and name not in self._refused:
            return False
        self._forget(name)
        self._rebuild()
        return True

    def _forget(self, name: str) -> None:
        self._checked.pop(name, None)
        self._refused.pop(name, None)
        self._dirty.discard(name)
        for node in self._members.pop(name, ()):
            self._containers[node].discard(name)

    def left_out(self) -> Mapping[str, str]:
        """HyperNode name -> why it gives no labels."""
        return {**self._refused, **self._tree_refused, **self._conflicts}

    def tiers(self) -> tuple[int, ...]:
        """The tiers of the HyperNodes in the tree, lowest first."""
        return tuple(sorted({h.tier for h in self._tree.values()}))

    def tier_names(self) -> dict[str, int]:
        """``tierName`` -> tier (Volcano's ``HyperNodeTierNameMap``: on a
        clash the last one read wins, here the last by name)."""
        return {h.tier_name: h.tier for _, h in sorted(self._tree.items()) if h.tier_name}

    # ------------------------------------------------------------ the tree

    def _rebuild(self) -> None:
        """Parents from HyperNode members; leave out, as Volcano's
        ``BuildHyperNodeCache`` errors on them, the HyperNodes of a cycle
        ("cyclic dependency detected") and one that claims a child another
        already has (``addChild``: "already has a parent"; the first by name
        keeps it); and, so that a node has one HyperNode per tier, one whose
        member HyperNode's tier is not lower than its own."""
        self.version += 1
        refused: dict[str, str] = {}
        tree = dict(self._checked)
        while cycle := _find_cycle(tree):
            shown = (
                " -> ".join([*cycle, cycle[0]])
                if len(cycle) <= 8
                else f"{' -> '.join(cycle[:8])} -> ... ({len(cycle)} HyperNodes)"
            )
            for name in cycle:
                refused[name] = f"cyclic dependency detected: {shown}"
                del tree[name]
        parent: dict[str, str] = {}
        again = True
        while again:
            again, parent = False, {}
            for name in sorted(tree):
                h = tree[name]
                reason = None
                for child in h.children:
                    c = tree.get(child)
                    if child in parent:
                        reason = f"HyperNode {child} already has a parent {parent[child]}"
                    elif c is not None and c.tier >= h.tier:
                        reason = f"member HyperNode {child} has tier {c.tier}, not below this tier {h.tier}"
                    if reason:
                        break
                if reason is not None:
                    refused[name] = reason
                    del tree[name]
                    again = True
                    break
                for child in h.children:
                    parent[child] = name
        self._tree_refused, self._tree, self._parent = refused, tree, parent
        self._out = None
        self._report(self._refused | refused)

    def _report(self, reasons: Mapping[str, str]) -> None:
        """Log each left-out HyperNode once per reason."""
        for name, reason in sorted(reasons.items()):
            if self._reported.get(name) != reason:
                log.error("ignoring HyperNode %s: %s", name, reason)
        self._reported = dict(reasons)

    # ------------------------------------------------------------ the nodes

    def compute(self, nodes: Iterable[model.Node]) -> dict[str, dict[str, str]]:
        """Tier label -> node name -> HyperNode name, for these nodes. A node
        held by two HyperNodes of one tier leaves the later-named one out
        (with everything above it that only it connected), and the labels
        are computed again without it."""
        if not self._checked:
            self._conflicts, self._seen, self._containers = {}, {}, {}
            return {}
        self._sync({n.metadata.name: n.metadata.labels for n in nodes})
        if self._out is not None:
            return self._out
        excluded: dict[str, str] = {}
        while True:
            out, conflict = self._labels(excluded)
            if conflict is None:
                break
            node, tier, first, second = conflict
            excluded[second] = f"node {node} is also in HyperNode {first} of tier {tier}"
        self._conflicts, self._out = excluded, out
        self._report(self._refused | self._tree_refused | excluded)
        return out

    def _sync(self, nodes: Mapping[str, Mapping[str, str]]) -> None:
        """Bring ``_members``/``_containers`` up to these nodes: gone nodes
        dropped, new or relabelled ones matched against every HyperNode
        (through name and label indexes), HyperNodes put since matched
        against every node."""
        seen, containers, members = self._seen, self._containers, self._members
        changed = bool(self._dirty)
        for name in [n for n in seen if n not in nodes]:
            for h in containers.pop(name, ()):
                members[h].discard(name)
            del seen[name]
            changed = True
        fresh = [(n, lb) for n, lb in nodes.items() if (was := seen.get(n)) is not lb and was != lb]
        if fresh:
            changed = True
            candidates = self._candidates()
            for name, node_labels in fresh:
                seen[name] = node_labels
                new = {h.name for h in candidates(name, node_labels) if h.selects(name, node_labels)}
                old = containers.get(name, set())
                for h_name in old - new:
                    members[h_name].discard(name)
                for h_name in new - old:
                    members.setdefault(h_name, set()).add(name)
                containers[name] = new
        if self._dirty:
            index = _LabelIndex(nodes)
            for h_name in sorted(self._dirty):
                selected = self._checked[h_name].select(nodes, index)
                members[h_name] = selected
                for node in selected:
                    containers.setdefault(node, set()).add(h_name)
            self._dirty.clear()
        if changed:
            self._out = None

    def _candidates(self) -> Callable[[str, Mapping[str, str]], Iterable[_Checked]]:
        """HyperNodes (not put since the last sync) that may select a node:
        by exact name, by the first matchLabels pair, or scanned (regexes,
        selectors with expressions only)."""
        by_name: dict[str, list[_Checked]] = {}
        by_label: dict[str, dict[str, list[_Checked]]] = {}
        scanned: list[_Checked] = []
        for h in self._checked.values():
            if h.name in self._dirty:
                continue
            for n in h.exact:
                by_name.setdefault(n, []).append(h)
            for sel in h.selectors:
                if sel.match_labels:
                    k, v = next(iter(sel.match_labels.items()))
                    by_label.setdefault(k, {}).setdefault(v, []).append(h)
                else:
                    scanned.append(h)
            if h.regexes:
                scanned.append(h)

        def candidates(name: str, node_labels: Mapping[str, str]) -> Iterable[_Checked]:
            out = [*by_name.get(name, ()), *scanned]
            for k, by_value in by_label.items():
                if (v := node_labels.get(k)) is not None:
                    out.extend(by_value.get(v, ()))
            return out

        return candidates

    def _labels(
        self, excluded: Mapping[str, str]
    ) -> tuple[dict[str, dict[str, str]], tuple[str, int, str, str] | None]:
        tree = {n: h for n, h in self._tree.items() if n not in excluded}
        chains: dict[str, list[tuple[int, str]]] = {}
        for name in tree:
            chain, at = [], name
            while at in tree:
                chain.append((tree[at].tier, at))
                at = self._parent.get(at, "")
            chains[name] = chain
        out: dict[str, dict[str, str]] = {}
        for node_name, direct in self._containers.items():
            held: dict[int, str] = {}
            for name in sorted(direct):
                if name not in chains:
                    continue
                for tier, hn in chains[name]:
                    have = held.setdefault(tier, hn)
                    if have != hn:
                        first, second = sorted((have, hn))
                        return out, (node_name, tier, first, second)
            for tier, hn in held.items():
                out.setdefault(tier_label(tier), {})[node_name] = hn
        return out, None


def _find_cycle(tree: Mapping[str, _Checked]) -> list[str]:
    """One cycle of HyperNode membership among ``tree``, in order; [] for none
    (a depth-first walk without recursion: a chain may be long)."""
    done: set[str] = set()
    for start in sorted(tree):
        if start in done:
            continue
        path: list[str] = [start]
        on_path = {start}
        stack = [iter(tree[start].children)]
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                continue
            if child not in tree or child in done:
                continue
            if child in on_path:
                return path[path.index(child) :]
            path.append(child)
            on_path.add(child)
            stack.append(iter(tree[child].children))
    return []
