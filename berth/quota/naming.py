"""Which Berth queue a pod names, in the keys job frameworks write.

``queueKeys`` (configuration) lists label-or-annotation keys consulted in
order; the first one a pod carries (a label first, then an annotation of the
same key) names its queue. Failing those, the ``spec.queue`` of the pod's
Volcano or KAI PodGroup does. ``queueAliases`` maps a framework's queue name
to a Berth queue (``root.sandbox`` → ``sandbox``); a name with no alias is
the Berth queue of the same name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping

from berth.cluster import model

__all__ = ["DEFAULT_QUEUE_KEYS", "QueueNaming", "validate_keys"]

#: Where each framework names a queue (each cited where it is written):
DEFAULT_QUEUE_KEYS: tuple[str, ...] = (
    "berth.dev/queue",  # Berth's own
    "kueue.x-k8s.io/queue-name",  # Kueue: constants.QueueLabel (pkg/controller/constants)
    "scheduling.volcano.sh/queue-name",  # Volcano: QueueNameAnnotationKey (apis scheduling/v1beta1/labels.go)
    "volcano.sh/queue-name",  # Volcano: batch QueueNameKey (KubeRay's volcano batch scheduler sets it)
    "yunikorn.apache.org/queue",  # YuniKorn: CanonicalLabelQueueName / AnnotationQueueName
    "kai.scheduler/queue",  # KAI-Scheduler: the queue label (KubeRay's kai-scheduler batch scheduler)
)


def validate_keys(keys: Iterable[str]) -> list[str]:
    """The keys, checked: non-empty, no repeats; raises ValueError naming the first bad one."""
    out: list[str] = []
    for i, key in enumerate(keys):
        if not key or key != key.strip():
            raise ValueError(f"[{i}]: {key!r} is not a label or annotation key")
        if key in out:
            raise ValueError(f"[{i}]: {key!r} is listed twice")
        out.append(key)
    return out


@dataclasses.dataclass(slots=True)
class QueueNaming:
    """See the module docstring. ``group_queue(pod)``: the ``spec.queue`` of
    the pod's PodGroup ("" : none)."""

    keys: tuple[str, ...] = DEFAULT_QUEUE_KEYS
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    group_queue: Callable[[model.Pod], str] = lambda pod: ""

    def named(self, pod: model.Pod) -> tuple[str, str] | None:
        """(Berth queue, where the pod names it — the label's key
        ``berth.dev/queue``, ``annotation KEY``, ``its PodGroup's spec.queue``), or None."""
        labels, annotations = pod.metadata.labels, pod.metadata.annotations
        for key in self.keys:
            value, where = labels.get(key), key
            if not value:
                value, where = annotations.get(key), f"annotation {key}"
            if value:
                return self._alias(value, where)
        value = self.group_queue(pod)
        if value:
            return self._alias(value, "its PodGroup's spec.queue")
        return None

    def _alias(self, value: str, where: str) -> tuple[str, str]:
        target = self.aliases.get(value)
        if target is None:
            return value, where
        return target, f'{where} "{value}", an alias'
