"""Which Kubernetes release the API server runs, so Berth follows that
release's scheduler (:mod:`berth.features`).

kube-scheduler follows its own build's release; Berth is one build for every
supported release, so it reads ``/version`` once at start (as ``kubectl
version`` does) and resolves the feature gates for that minor. A cluster
older than the oldest supported release is scheduled as that oldest one, a
newer one as the newest, each with a warning: Berth never refuses to start
for a version, but says what it follows.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from kubernetes_asyncio import client

from berth import features
from berth.adapters.kubernetes.backoff import Backoff, describe

__all__ = ["cluster_version", "nearest_supported"]

log = logging.getLogger(__name__)

#: The API server may still be starting with Berth: ask for this long, then
#: follow the configuration's release (or the newest) and say so.
VERSION_WAIT_SECONDS = 30.0


def nearest_supported(major: int, minor: int) -> features.KubeVersion:
    """The supported release closest to ``major.minor``."""
    asked = features.KubeVersion(major, minor)
    if asked < features.SUPPORTED[0]:
        return features.SUPPORTED[0]
    if asked > features.NEWEST:
        return features.NEWEST
    return asked


def _minor(text: str) -> int:
    # Some distributions report "27+": the digits are the release.
    digits = "".join(ch for ch in text if ch.isdigit())
    return int(digits)


async def cluster_version(api: client.ApiClient, *, wait: float = VERSION_WAIT_SECONDS) -> features.KubeVersion | None:
    """The supported release to follow for this API server, or None when it
    did not answer within ``wait`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    backoff = Backoff(clock=loop.time)
    while True:
        try:
            # Read raw: the generated VersionInfo model insists on every field
            # (buildDate, compiler, ...) that some distributions leave out.
            resp: Any = await client.VersionApi(api).get_code(
                _request_timeout=max(1.0, deadline - loop.time()), _preload_content=False
            )
            info = json.loads(await resp.read())
            major, minor = _minor(str(info["major"])), _minor(str(info["minor"]))
            git_version = str(info.get("gitVersion", f"v{major}.{minor}"))
        except Exception as e:  # any failure: retry within the bound, then fall back
            delay = backoff.next()
            if loop.time() + delay >= deadline:
                log.warning("reading the API server's version failed (%s); giving up after %.0fs", describe(e), wait)
                return None
            log.warning("reading the API server's version failed (%s); retrying in %.1fs", describe(e), delay)
            await asyncio.sleep(delay)
            continue
        version = nearest_supported(major, minor)
        if (major, minor) != (version.major, version.minor):
            log.warning(
                "the API server runs Kubernetes %s (%s); Berth follows %s, the nearest release it supports",
                f"{major}.{minor}",
                git_version,
                version,
            )
        else:
            log.info("the API server runs Kubernetes %s: Berth follows kube-scheduler %s", git_version, version)
        return version
