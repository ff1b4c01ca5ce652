"""Which plugins exist, which run by default, and how a profile picks them.

In-tree plugins are listed in :data:`IN_TREE` (kube-scheduler's
``plugins/registry.go``); out-of-tree plugins are Python classes published
by any installed distribution under the entry-point group ``berth.plugins``::

    [project.entry-points."berth.plugins"]
    GpuTopology = "my_company.berth_plugins:GpuTopology"

A plugin class has ``NAME``, optional ``Args`` (a msgspec Struct its
``pluginConfig`` args are decoded into, checked by its ``validate()`` — or
``validate(features=...)`` when the rules follow the release's feature gates,
as upstream's ``ValidateVolumeBindingArgsWithOptions`` does), is constructed as
``cls(args, handle)``, and implements the methods of the extension points it
extends (:mod:`berth.framework.interface`).

Profile resolution follows KubeSchedulerConfiguration: the default
``multiPoint`` set (:data:`DEFAULT_MULTI_POINT`, kube-scheduler's
``default_plugins.go`` plus Berth's Coscheduling) merged with the profile's
``multiPoint``; then, per extension point, plugins enabled at that point come
first, followed by the multiPoint plugins that implement it and are not
disabled there (``disabled: [{name: "*"}]`` disables all of them).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import importlib.metadata
import inspect
import logging
import traceback
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from berth import features

if TYPE_CHECKING:
    from berth.framework.handle import Handle
    from berth.framework.profile import Profile

__all__ = [
    "DEFAULT_MULTI_POINT",
    "EXTENSION_POINTS",
    "IN_TREE",
    "RegistryError",
    "ResolvedProfile",
    "available",
    "build",
    "default_multi_point",
    "plugin_class",
    "resolve_profile",
]

log = logging.getLogger(__name__)

#: Name -> "module:Class" of every in-tree plugin, imported on first use.
IN_TREE: dict[str, str] = {
    "PrioritySort": "berth.plugins.priority_sort:PrioritySort",
    "SchedulingGates": "berth.plugins.scheduling_gates:SchedulingGates",
    "NodeUnschedulable": "berth.plugins.node_unschedulable:NodeUnschedulable",
    "NodeName": "berth.plugins.node_name:NodeName",
    "TaintToleration": "berth.plugins.taint_toleration:TaintToleration",
    "NodeAffinity": "berth.plugins.node_affinity:NodeAffinity",
    "NodePorts": "berth.plugins.node_ports:NodePorts",
    "NodeResourcesFit": "berth.plugins.noderesources:NodeResourcesFit",
    "VolumeRestrictions": "berth.plugins.volumerestrictions:VolumeRestrictions",
    "NodeVolumeLimits": "berth.plugins.nodevolumelimits:NodeVolumeLimits",
    "VolumeBinding": "berth.plugins.volumebinding:VolumeBinding",
    "VolumeZone": "berth.plugins.volumezone:VolumeZone",
    "PodTopologySpread": "berth.plugins.podtopologyspread:PodTopologySpread",
    "InterPodAffinity": "berth.plugins.interpodaffinity:InterPodAffinity",
    "DynamicResources": "berth.plugins.dynamicresources:DynamicResources",
    "DefaultPreemption": "berth.plugins.default_preemption:DefaultPreemption",
    "NodeResourcesBalancedAllocation": "berth.plugins.noderesources:NodeResourcesBalancedAllocation",
    "ImageLocality": "berth.plugins.image_locality:ImageLocality",
    "Coscheduling": "berth.plugins.coscheduling:Coscheduling",
    "DefaultBinder": "berth.plugins.default_binder:DefaultBinder",
    "NodeDeclaredFeatures": "berth.plugins.node_declared_features:NodeDeclaredFeatures",
    "GangScheduling": "berth.plugins.gangscheduling:GangScheduling",
    "TopologyGang": "berth.plugins.topology_gang:TopologyGang",
    "Reservation": "berth.plugins.reservation:Reservation",
}

#: kube-scheduler v1.37.2 ``apis/config/v1/default_plugins.go``
#: (``getDefaultPlugins``: the volume plugins between NodeResourcesFit and
#: PodTopologySpread; NodeName before NodeUnschedulable since 1.37), with
#: DynamicResources (weight 2, a Score since 1.35) before DefaultPreemption as
#: ``applyDynamicResources`` puts it (an idle claim is deallocated before any
#: pod is evicted), plus Berth's Coscheduling. (name, weight). The plugins
#: that follow feature gates are added by :func:`default_multi_point`.
DEFAULT_MULTI_POINT: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeName", None),
    ("NodeUnschedulable", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("Coscheduling", None),
    ("DefaultBinder", None),
)


def default_multi_point(
    feats: features.Features, *, topology_aware: bool = False, reservations: bool = False
) -> tuple[tuple[str, int | None], ...]:
    """The default multiPoint set of ``feats``' release (``applyFeatureGates``):
    before 1.37 NodeUnschedulable ran before NodeName; NodeDeclaredFeatures is
    appended when its gate is on, GangScheduling when GenericWorkload is,
    DynamicResources only when DRA is; TopologyGang (Berth's) when the
    configuration has ``topologies`` (``topology_aware``)."""
    out = list(DEFAULT_MULTI_POINT)
    if feats.version < features.KubeVersion(1, 37):
        i = out.index(("NodeName", None))
        out[i], out[i + 1] = out[i + 1], out[i]
    if not feats.dynamic_resource_allocation:
        out.remove(("DynamicResources", 2))
    if feats.node_declared_features and "NodeDeclaredFeatures" in IN_TREE:
        out.append(("NodeDeclaredFeatures", None))
    # applyGangScheduling (default_plugins.go v1.37.2): appended with GenericWorkload.
    if feats.generic_workload:
        out.append(("GangScheduling", None))
    if topology_aware:
        # Weight 2: its packing inside a gang's domain outweighs
        # NodeResourcesFit's LeastAllocated spreading (weight 1).
        out.append(("TopologyGang", 2))
    if reservations:  # a queue sets ``reservation`` (berth.plugins.reservation)
        out.append(("Reservation", None))
    return tuple(out)


#: Extension point (config key) -> the method that marks a plugin as extending it.
EXTENSION_POINTS: dict[str, str] = {
    "preEnqueue": "pre_enqueue",
    "queueSort": "sort_key",
    "preFilter": "pre_filter",
    "filter": "filter",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score",
    "reserve": "reserve",
    "permit": "permit",
    "preBind": "pre_bind",
    "bind": "bind",
    "postBind": "post_bind",
}

MAX_WEIGHT = 100


class RegistryError(ValueError):
    """A plugin that does not exist, or a profile that misuses one.

    The message starts with the field path inside a profile.
    """


@dataclasses.dataclass(frozen=True, slots=True)
class _Installed:
    """Plugins published under the ``berth.plugins`` entry-point group."""

    found: dict[str, type]
    origin: dict[str, str]  # name -> "module:Class (distribution version)"
    broken: dict[str, str]  # name -> why it could not be loaded, with its traceback


@functools.cache
def _installed() -> _Installed:
    found: dict[str, type] = {}
    origin: dict[str, str] = {}
    broken: dict[str, str] = {}
    for ep in importlib.metadata.entry_points(group="berth.plugins"):
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "unknown distribution"
        try:
            cls = ep.load()
        except Exception:  # a broken third-party plugin must not hide the others
            broken[ep.name] = f"{ep.value} ({dist}) failed to import:\n{traceback.format_exc().rstrip()}"
            continue
        if not isinstance(cls, type) or getattr(cls, "NAME", None) != ep.name:
            broken[ep.name] = f"{ep.value} ({dist}) is not a plugin class whose NAME is {ep.name!r}"
            continue
        found[ep.name] = cls
        origin[ep.name] = f"{ep.value} ({dist})"
    return _Installed(found, origin, broken)


_extra: dict[str, type] = {}


def register(cls: type) -> type:
    """Register an out-of-tree plugin class programmatically (tests, embedding)."""
    _extra[cls.NAME] = cls  # type: ignore[attr-defined]
    return cls


def available() -> list[str]:
    return sorted({*IN_TREE, *_installed().found, *_extra})


def log_available() -> None:
    """At start: the installed plugins, and each broken one with its traceback."""
    inst = _installed()
    for name in sorted(inst.found):
        log.info("plugin %s from %s", name, inst.origin[name])
    for name in sorted(inst.broken):
        log.error("plugin %s cannot be used: %s", name, inst.broken[name])
    log.info("plugins available: %s", ", ".join(available()))


def plugin_class(name: str) -> type:
    if name in _extra:
        return _extra[name]
    if name in IN_TREE:
        module, _, attr = IN_TREE[name].partition(":")
        try:
            cls: type = getattr(importlib.import_module(module), attr)
        except ImportError as e:
            raise RegistryError(f"plugin {name!r} is not available: {e}") from None
        return cls
    inst = _installed()
    if name in inst.found:
        return inst.found[name]
    if name in inst.broken:
        raise RegistryError(f"plugin {name!r}: entry point {inst.broken[name]}")
    known = available()
    close = difflib.get_close_matches(name, known, n=1)
    hint = f'; did you mean "{close[0]}"?' if close else ""
    raise RegistryError(f"unknown plugin {name!r}{hint} (known: {', '.join(known)})")


def _implements(cls: type, point: str) -> bool:
    return callable(getattr(cls, EXTENSION_POINTS[point], None))


@dataclasses.dataclass(slots=True)
class ResolvedProfile:
    """The plugins of one profile, per extension point, in order."""

    name: str
    points: dict[str, list[str]]
    weights: dict[str, int]
    args: dict[str, dict[str, Any]]

    @property
    def queue_sort(self) -> list[str]:
        return self.points["queueSort"]

    def plugin_names(self) -> list[str]:
        seen: dict[str, None] = {}
        for names in self.points.values():
            for n in names:
                seen[n] = None
        return list(seen)


_CAMEL = {
    "multiPoint": "multi_point",
    "preEnqueue": "pre_enqueue",
    "queueSort": "queue_sort",
    "preFilter": "pre_filter",
    "filter": "filter",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score",
    "reserve": "reserve",
    "permit": "permit",
    "preBind": "pre_bind",
    "bind": "bind",
    "postBind": "post_bind",
}


def _check_weight(weight: int | None, path: str) -> None:
    if weight is not None and not 1 <= weight <= MAX_WEIGHT:
        raise RegistryError(f"{path}.weight: must be between 1 and {MAX_WEIGHT}, got {weight}")


def resolve_profile(
    profile: Profile,
    feats: features.Features | None = None,
    *,
    topology_aware: bool = False,
    reservations: bool = False,
) -> ResolvedProfile:
    """Expand a profile's plugin configuration for the release and gates of
    ``feats`` (default: the newest release), with TopologyGang among the
    defaults when ``topology_aware`` (topologies are configured); raises RegistryError."""
    feats = feats or features.Features.newest()
    plugins = profile.plugins
    mp_user = plugins.multi_point
    multi: dict[str, int | None] = {}
    disabled_all = any(d.name == "*" for d in mp_user.disabled)
    mp_disabled = {d.name for d in mp_user.disabled}
    if not disabled_all:
        for name, weight in default_multi_point(feats, topology_aware=topology_aware, reservations=reservations):
            if name not in mp_disabled and name in IN_TREE:
                multi[name] = weight
    for j, ref in enumerate(mp_user.enabled):
        path = f"plugins.multiPoint.enabled[{j}]"
        _require(ref.name, path)
        _check_weight(ref.weight, path)
        multi[ref.name] = ref.weight if ref.weight is not None else multi.get(ref.name)

    points: dict[str, list[str]] = {}
    weights: dict[str, int] = {}
    for point in EXTENSION_POINTS:
        pset = getattr(plugins, _CAMEL[point])
        disabled = {d.name for d in pset.disabled}
        order: list[str] = []
        for j, ref in enumerate(pset.enabled):
            path = f"plugins.{point}.enabled[{j}]"
            cls = _require(ref.name, path)
            if not _implements(cls, point):
                raise RegistryError(f"{path}.name: plugin {ref.name!r} does not extend {point}")
            if ref.name in order:
                raise RegistryError(f"{path}.name: plugin {ref.name!r} is enabled twice")
            order.append(ref.name)
            if point == "score":
                _check_weight(ref.weight, path)
                if ref.weight is not None:
                    weights[ref.name] = ref.weight
        if "*" not in disabled:
            for name in multi:
                if name in order or name in disabled:
                    continue
                cls = _require(name, "plugins.multiPoint")
                if _implements(cls, point):
                    order.append(name)
        points[point] = order
    for name in points["score"]:
        if name not in weights:
            w = multi.get(name)
            weights[name] = w if w is not None else 1
    if len(points["queueSort"]) != 1:
        raise RegistryError(
            f"plugins.queueSort: exactly one queueSort plugin must be enabled, got {points['queueSort']}"
        )
    if not points["bind"]:
        raise RegistryError("plugins.bind: at least one bind plugin must be enabled")

    enabled = {n for names in points.values() for n in names}
    args: dict[str, dict[str, Any]] = {}
    for j, pc in enumerate(profile.plugin_config):
        path = f"pluginConfig[{j}]"
        cls = _require(pc.name, f"{path}")
        if pc.name in args:
            raise RegistryError(f"{path}.name: duplicate pluginConfig for {pc.name!r}")
        args[pc.name] = pc.args
        if pc.name in enabled:
            _decode_args(cls, pc.args, f"{path}.args", feats)
    return ResolvedProfile(profile.scheduler_name, points, weights, args)


def _require(name: str, path: str) -> type:
    try:
        return plugin_class(name)
    except RegistryError as e:
        raise RegistryError(f"{path}.name: {e}") from None


def _decode_args(cls: type, raw: Mapping[str, Any], path: str, feats: features.Features | None = None) -> Any:
    """``raw`` decoded into ``cls.Args`` and validated for the gates of
    ``feats`` (default: the newest release's); raises RegistryError."""
    args_type = getattr(cls, "Args", None)
    if args_type is None:
        if raw:
            raise RegistryError(f"{path}: plugin {cls.NAME!r} takes no arguments")  # type: ignore[attr-defined]
        return None
    try:
        args = msgspec.convert(dict(raw), args_type)
    except msgspec.ValidationError as e:
        text = str(e)
        msg, _, where = text.partition(" - at `")
        sub = where.rstrip("`").removeprefix("$")
        if msg.startswith("Object contains unknown field") and "`" in msg:
            return _raise(f"{path}{sub}.{msg.split('`')[1]}: unknown field")
        return _raise(f"{path}{sub}: {msg}")
    validate = getattr(args, "validate", None)
    if callable(validate):
        try:
            if "features" in inspect.signature(validate).parameters:
                validate(features=feats or features.Features.newest())
            else:
                validate()
        except ValueError as e:
            raise RegistryError(f"{path}: {e}") from None
    return args


def _raise(message: str) -> Any:
    raise RegistryError(message)


def build(resolved: ResolvedProfile, handle: Handle) -> dict[str, Any]:
    """Instantiate every plugin of a resolved profile, once each."""
    out: dict[str, Any] = {}
    for name in resolved.plugin_names():
        cls = plugin_class(name)
        args = _decode_args(cls, resolved.args.get(name, {}), f"pluginConfig[{name}].args", handle.features)
        out[name] = cls(args, handle)
    return out
