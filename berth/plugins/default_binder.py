"""DefaultBinder: bind through the source that owns the pod
(``plugins/defaultbinder/default_binder.go`` — there a Binding subresource;
here whatever :class:`berth.cluster.sources.Source` the pod came from: the
Kubernetes API, or the embedded cluster).
"""

from __future__ import annotations

from typing import Any, ClassVar

from berth.cache.table import PodInfo
from berth.cluster.sources import BindError
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["DefaultBinder"]


class DefaultBinder:
    NAME: ClassVar[str] = "DefaultBinder"
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle

    async def bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        core: Any = self.handle.extras.get("core") if self.handle is not None else None
        if core is None:
            return fw.Status.error("DefaultBinder has no core to bind through")
        source = core.pod_sources.get(pod.uid) or core.default_source
        if source is None:
            return fw.Status.error(f"no source owns pod {pod.key}")
        try:
            await source.bind(pod.pod, node)
        except BindError as e:
            return fw.Status.error(str(e))
        return fw.SUCCESS
