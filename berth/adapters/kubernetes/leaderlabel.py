"""The leader's own Pod labelled ``berth.dev/leader: "true"`` while it leads.

Every replica serves the extender (kube-scheduler may call any of them),
but scheduling state — the queue, the decisions, the dashboard — is the
leader's alone; a standby answers those reads ``UNAVAILABLE: not the
leader``. The chart therefore puts gRPC and the dashboard behind a Service
that selects this label, so one address always reaches the replica that
knows. The alternatives were worse:

- readiness per role (standbys not Ready) would keep every standby out of
  the extender's Service too, and a Deployment's rolling update waits for
  new pods to become Ready: a new standby never would, and the rollout
  would stall;
- forwarding reads from a standby to the leader needs every replica to
  reach and authenticate to every other one: more moving parts than a label.

The label is written with a JSON merge patch on ``pods/<POD_NAME>`` in
``POD_NAMESPACE`` (the downward API; the chart sets both). Without
``POD_NAME`` (``berth serve`` outside a Pod) nothing is labelled.

A leader that loses the API server cannot remove its own label; so a new
leader, once its own label is written, also removes the label from any
other Pod of the same Berth (same ``app.kubernetes.io/name`` and
``app.kubernetes.io/instance`` labels as its own Pod) that still carries
it. Between a lost term and that sweep the Service may briefly hold two
endpoints, the old of which answers ``UNAVAILABLE``: clients retry.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio import client

from berth.adapters.kubernetes.backoff import Backoff, describe

__all__ = ["LABEL", "SAME_BERTH_LABELS", "LeaderLabel"]

log = logging.getLogger(__name__)

#: The label the chart's leader-only Service selects on.
LABEL = "berth.dev/leader"
#: Pods carrying the same values of these labels as ours are replicas of the
#: same Berth (the chart's selector labels, Kubernetes' recommended labels).
SAME_BERTH_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/instance")

_MERGE_PATCH = "application/merge-patch+json"


class LeaderLabel:
    """Labels one Pod while its process leads."""

    def __init__(self, api: client.ApiClient, *, pod: str, namespace: str, request_timeout: float = 5.0) -> None:
        self.api = api
        self.pod = pod
        self.namespace = namespace
        self.request_timeout = request_timeout
        #: Whether our Pod carries the label, as last written by us.
        self.labelled = False

    @classmethod
    def from_env(
        cls, api: client.ApiClient, env: Mapping[str, str] = os.environ, *, request_timeout: float = 5.0
    ) -> LeaderLabel | None:
        """From ``POD_NAME`` and ``POD_NAMESPACE``; None without ``POD_NAME``
        (not in a Pod). ``POD_NAME`` without ``POD_NAMESPACE`` is refused:
        guessing a namespace would label someone else's Pod."""
        pod = env.get("POD_NAME", "").strip()
        if not pod:
            return None
        namespace = env.get("POD_NAMESPACE", "").strip()
        if not namespace:
            raise ValueError("POD_NAME is set but POD_NAMESPACE is not: set both from the downward API")
        return cls(api, pod=pod, namespace=namespace, request_timeout=request_timeout)

    async def _patch(self, name: str, value: str | None) -> Any:
        body = {"metadata": {"labels": {LABEL: value}}}
        # Any: the generated signature does not declare _content_type.
        core_v1: Any = client.CoreV1Api(self.api)
        return await core_v1.patch_namespaced_pod(
            name, self.namespace, body, _content_type=_MERGE_PATCH, _request_timeout=self.request_timeout
        )

    async def set(self, backoff: Backoff | None = None) -> None:
        """Label our Pod, retrying with ``backoff`` until it is written (run
        as a task for the length of a term; cancelled when it ends); then
        remove the label from other replicas still carrying it."""
        backoff = backoff or Backoff(clock=asyncio.get_running_loop().time)
        while True:
            try:
                pod = await self._patch(self.pod, "true")
                break
            except asyncio.CancelledError:
                raise
            except Exception as e:  # API error, refused connection, timeout: the Service waits for us
                delay = backoff.next()
                log.warning(
                    "labelling pod %s/%s %s=true failed (%s); retrying in %.1fs",
                    self.namespace,
                    self.pod,
                    LABEL,
                    describe(e),
                    delay,
                )
                await asyncio.sleep(delay)
        self.labelled = True
        log.info("pod %s/%s labelled %s=true", self.namespace, self.pod, LABEL)
        labels = (pod.metadata.labels if pod is not None and pod.metadata is not None else None) or {}
        await self.sweep(labels)

    def _others_selector(self, own_labels: Mapping[str, str]) -> str | None:
        same = [f"{k}={own_labels[k]}" for k in SAME_BERTH_LABELS if own_labels.get(k)]
        if len(same) != len(SAME_BERTH_LABELS):
            return None  # not the chart's labels: which Pods are ours is not known
        return ",".join([f"{LABEL}=true", *same])

    async def sweep(self, own_labels: Mapping[str, str]) -> int:
        """Remove the label from the other Pods of this Berth that carry it
        (a leader that lost its term without reaching the API server);
        returns how many. Failures are logged: the next term sweeps again."""
        selector = self._others_selector(own_labels)
        if selector is None:
            return 0
        removed = 0
        try:
            pods = await client.CoreV1Api(self.api).list_namespaced_pod(
                self.namespace, label_selector=selector, _request_timeout=self.request_timeout
            )
            for other in pods.items or []:
                name = other.metadata.name
                if name == self.pod:
                    continue
                await self._patch(name, None)
                removed += 1
                log.info("removed %s from pod %s/%s, which no longer leads", LABEL, self.namespace, name)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("removing stale %s labels in %s failed: %s", LABEL, self.namespace, describe(e))
        return removed

    async def clear(self) -> bool:
        """Remove the label from our Pod (once, bounded by the request
        timeout); True when removed. Called when a term ends, before the
        Lease is released."""
        try:
            await self._patch(self.pod, None)
        except Exception as e:
            log.warning("removing %s from pod %s/%s failed: %s", LABEL, self.namespace, self.pod, describe(e))
            return False
        self.labelled = False
        log.info("pod %s/%s: %s removed", self.namespace, self.pod, LABEL)
        return True
