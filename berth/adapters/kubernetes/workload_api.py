"""The Workload API (``scheduling.k8s.io``, GenericWorkload) in Kubernetes
mode: which versions to watch, and the PodGroup status conditions Berth
writes back.

Watched (only while the release's ``GenericWorkload`` gate is on, and only
what the API server serves — the beta API needs
``--runtime-config=scheduling.k8s.io/v1beta1=true`` on 1.37):

- 1.36, 1.37: PodGroups, the newest served version of
  :func:`berth.cluster.workload_api.served_versions` (1.37: v1beta1, else
  v1alpha3; 1.36: v1alpha2);
- 1.35: Workloads v1alpha1 (1.35's pods name a Workload's podGroup).

Written: the PodGroup's ``PodGroupInitiallyScheduled`` (1.36:
``PodGroupScheduled``) condition, as kube-scheduler v1.37.2's
``updatePodGroupCondition`` writes it (schedule_one_podgroup.go): a
strategic-merge patch of ``status.conditions`` (merge key ``type``) on the
status subresource, so conditions others wrote stay. Writes run in the
background, in order per PodGroup; one that fails is logged (the next
outcome writes again), a PodGroup already gone is fine.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from berth.adapters.kubernetes.writes import REQUEST_TIMEOUT_SECONDS
from berth.cluster import workload_api

__all__ = ["PLURALS", "PodGroupConditions"]

log = logging.getLogger(__name__)

#: kind -> resource name.
PLURALS = {"PodGroup": "podgroups", "Workload": "workloads"}


class PodGroupConditions:
    """Writes PodGroup conditions through the API server (``version``: the
    served PodGroup version the informer watches)."""

    def __init__(self, api: client.ApiClient, version: str) -> None:
        self._custom: Any = client.CustomObjectsApi(api)
        self.version = version
        #: The write in flight per PodGroup: the next one waits for it.
        self._last: dict[str, asyncio.Task[None]] = {}

    def write(self, group: workload_api.PodGroup, condition: workload_api.Condition) -> None:
        """In the background (the store calls it from the scheduling cycle)."""
        before = self._last.get(group.key)
        task = asyncio.get_running_loop().create_task(self._write(group, condition, before))
        self._last[group.key] = task
        key = group.key

        def done(t: asyncio.Task[None]) -> None:
            if self._last.get(key) is t:
                del self._last[key]

        task.add_done_callback(done)

    async def _write(
        self, group: workload_api.PodGroup, condition: workload_api.Condition, before: asyncio.Task[None] | None
    ) -> None:
        if before is not None:
            await asyncio.shield(before)
        md = group.metadata
        body = {"status": {"conditions": [msgspec.to_builtins(condition)]}}
        try:
            await self._custom.patch_namespaced_custom_object_status(
                workload_api.API_GROUP,
                self.version,
                md.namespace,
                PLURALS["PodGroup"],
                md.name,
                body,
                _content_type="application/strategic-merge-patch+json",
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        except ApiException as e:
            if e.status != 404:
                log.warning("writing %s of PodGroup %s: HTTP %s: %s", condition.type, group.key, e.status, e.reason)
        except (
            aiohttp.ClientError,
            OSError,
            TimeoutError,
        ) as e:  # the API server went away: the next outcome writes again
            log.warning("writing %s of PodGroup %s: %s", condition.type, group.key, e)

    async def close(self) -> None:
        """Wait for the writes in flight."""
        if self._last:
            await asyncio.gather(*self._last.values(), return_exceptions=True)
