"""DefaultBinder: bind through the source that owns the pod
(``plugins/defaultbinder/default_binder.go`` — there a Binding subresource;
here the Handle's client, which binds through the
:class:`~berth.cluster.sources.Source` the pod came from: the Kubernetes API,
or the embedded cluster).
"""

from __future__ import annotations

from typing import ClassVar

from berth.cache.infos import PodInfo
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["DefaultBinder"]


class DefaultBinder:
    NAME: ClassVar[str] = "DefaultBinder"
    Args: ClassVar[None] = None

    def __init__(self, args: None, handle: Handle) -> None:
        self.handle = handle

    async def bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        return await self.handle.client.bind(pod.pod, node)
