"""PrioritySort: activeQ pops the highest priority first, then the oldest.

Mirrors kube-scheduler v1.34 ``pkg/scheduler/framework/plugins/queuesort/priority_sort.go``::

    func (pl *PrioritySort) Less(pInfo1, pInfo2 fwk.QueuedPodInfo) bool {
        p1 := corev1helpers.PodPriority(pInfo1.Pod)
        p2 := corev1helpers.PodPriority(pInfo2.Pod)
        return (p1 > p2) || (p1 == p2 && pInfo1.Timestamp.Before(pInfo2.Timestamp))
    }

Berth's queue orders by a key instead of a comparison, so the key is
``(-priority, timestamp)``. ``PodPriority`` is ``spec.priority`` or 0.
"""

from __future__ import annotations

from typing import ClassVar

from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["PrioritySort"]


class PrioritySort:
    NAME: ClassVar[str] = "PrioritySort"
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle

    def sort_key(self, pod: fw.QueuedPodInfo) -> tuple[int, float]:
        return (-pod.info.priority, pod.timestamp)
