"""A scheduling profile's configuration: which plugins run at which
extension point and with which arguments (KubeSchedulerConfiguration's
``profiles[]``, ``k8s.io/kube-scheduler/config/v1``). Part of
BerthConfiguration; here because :mod:`berth.framework.registry` resolves it.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["DEFAULT_SCHEDULER_NAME", "PluginConfig", "PluginRef", "PluginSet", "Plugins", "Profile"]

DEFAULT_SCHEDULER_NAME = "berth"


class _Cfg(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class PluginRef(_Cfg):
    name: str
    weight: int | None = None


class PluginSet(_Cfg):
    enabled: list[PluginRef] = []
    disabled: list[PluginRef] = []


class Plugins(_Cfg):
    """Per extension point, like KubeSchedulerConfiguration's ``plugins``."""

    multi_point: PluginSet = msgspec.field(default_factory=PluginSet)
    pre_enqueue: PluginSet = msgspec.field(default_factory=PluginSet)
    queue_sort: PluginSet = msgspec.field(default_factory=PluginSet)
    pre_filter: PluginSet = msgspec.field(default_factory=PluginSet)
    filter: PluginSet = msgspec.field(default_factory=PluginSet)
    post_filter: PluginSet = msgspec.field(default_factory=PluginSet)
    pre_score: PluginSet = msgspec.field(default_factory=PluginSet)
    score: PluginSet = msgspec.field(default_factory=PluginSet)
    reserve: PluginSet = msgspec.field(default_factory=PluginSet)
    permit: PluginSet = msgspec.field(default_factory=PluginSet)
    pre_bind: PluginSet = msgspec.field(default_factory=PluginSet)
    bind: PluginSet = msgspec.field(default_factory=PluginSet)
    post_bind: PluginSet = msgspec.field(default_factory=PluginSet)


class PluginConfig(_Cfg):
    name: str
    args: dict[str, Any] = {}


class Profile(_Cfg):
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    #: More scheduler names whose pods this profile schedules as its own
    #: (``volcano``, ``yunikorn``, ``kai-scheduler``, ``scheduler-plugins-scheduler``):
    #: an alias takes that name over, so never run Berth beside the scheduler
    #: it replaces.
    aliases: list[str] = []
    plugins: Plugins = msgspec.field(default_factory=Plugins)
    plugin_config: list[PluginConfig] = []
    #: Overrides the global value for this profile.
    percentage_of_nodes_to_score: int | None = None
    #: Choose at random among the N best-scoring nodes (0 or 1: the best,
    #: ties broken at random, as kube-scheduler does).
    randomize_top_n: int = 0
