"""What a failing plugin looks like to everyone else: an Error status, or a
:class:`PluginError`, whose message names the plugin and the extension point
in kube-scheduler's words (``framework/runtime/framework.go`` v1.37.2), and
the checks that turn a wrong-shaped answer into one. The runtime
(:mod:`berth.framework.runtime`) calls these around every plugin call.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.framework import interface as fw

__all__ = [
    "ERROR_FORMATS",
    "PluginError",
    "checked_scores",
    "checked_verdicts",
    "named",
    "plugin_error",
    "raised",
]

log = logging.getLogger("berth.framework.runtime")  # where the runtime's other lines go

IntArray = npt.NDArray[np.int64]

#: How an extension point names the plugin in an Error status's message,
#: as kube-scheduler's framework wraps it (``framework/runtime/framework.go``
#: v1.37.2: ``running PreFilter plugin %q: %w``, ``running %q filter
#: plugin: %w``, ``running Score plugins: plugin %q failed with: %w``, ...).
#: PreEnqueue and PostFilter are Berth's words in the same pattern: upstream
#: only sets the status's plugin there, which no message shows.
ERROR_FORMATS: dict[str, str] = {
    "PreEnqueue": 'running PreEnqueue plugin "{plugin}": {message}',
    "PreFilter": 'running PreFilter plugin "{plugin}": {message}',
    "Filter": 'running "{plugin}" filter plugin: {message}',
    "PostFilter": 'running PostFilter plugin "{plugin}": {message}',
    "PreScore": 'running PreScore plugin "{plugin}": {message}',
    "Score": 'running Score plugins: plugin "{plugin}" failed with: {message}',
    "ScoreExtensionNormalize": 'running Normalize on Score plugins: plugin "{plugin}" failed with: {message}',
    "Reserve": 'running Reserve plugin "{plugin}": {message}',
    "Permit": 'running Permit plugin "{plugin}": {message}',
    "PreBindPreFlight": 'running PreBindPreFlight "{plugin}": {message}',
    "PreBind": 'running PreBind plugin "{plugin}": {message}',
    "Bind": 'running Bind plugin "{plugin}": {message}',
}


def plugin_error(point: str, plugin: str, message: str) -> fw.Status:
    """An Error status naming ``plugin`` and the extension point ``point``
    (:data:`ERROR_FORMATS`)."""
    return fw.Status.error(ERROR_FORMATS[point].format(plugin=plugin, message=message), plugin=plugin)


class PluginError(RuntimeError):
    """A plugin failed the attempt: it raised, returned an Error status or
    an answer of the wrong shape. ``str()`` names the plugin and the
    extension point (:data:`ERROR_FORMATS`). A bug in a plugin, never the
    request's fault: not a :class:`ValueError`, so the edges answer
    INTERNAL / 500 with the message."""

    def __init__(self, status: fw.Status, point: str) -> None:
        super().__init__(status.message())
        self.status = status
        self.plugin = status.plugin
        self.point = point


def named(point: str, plugin: str, st: fw.Status) -> fw.Status:
    """A failed status of ``plugin`` at ``point``: a rejection as it is
    (with its plugin), anything else an error naming the plugin and the
    point, once (:func:`raised` named it already)."""
    if st.is_rejection:
        return st.with_plugin(plugin)
    named = ERROR_FORMATS[point].format(plugin=plugin, message="")
    if st.code == fw.Code.ERROR and st.message().startswith(named):
        return st.with_plugin(plugin)
    return plugin_error(point, plugin, st.message() or f"returned {st.code.name}")


def raised(point: str, plugin: str, pod: PodInfo, e: Exception) -> fw.Status:
    """The Error status for a plugin that raised ``e``, logged once with the
    plugin's traceback (a :class:`PluginError` from a nested run, e.g.
    preemption's dry-run Filter, was logged where it was raised)."""
    if isinstance(e, PluginError):
        return plugin_error(point, plugin, str(e))
    log.error("%s plugin %s failed for pod %s", point, plugin, pod.key, exc_info=e)
    return plugin_error(point, plugin, f"{type(e).__name__}: {e}")


def checked_verdicts(plugin: str, v: Any, n: int) -> fw.NodeVerdicts:
    """A Filter plugin's answer for ``n`` rows, or :class:`PluginError`:
    one verdict per row, and no status but a rejection on a rejected row
    (RunFilterPlugins: anything but Success or a rejection is an error)."""
    if not isinstance(v, fw.NodeVerdicts):
        raise PluginError(plugin_error("Filter", plugin, f"returned {type(v).__name__}, not NodeVerdicts"), "Filter")
    if v.ok.shape != (n,):
        raise PluginError(
            plugin_error("Filter", plugin, f"returned {v.ok.size} verdicts for {n} nodes"),
            "Filter",
        )
    if any(not st.is_rejection for st in v.statuses):
        for k in np.flatnonzero(~v.ok).tolist():
            st = v.status_at(k)
            if not st.is_rejection:
                raise PluginError(plugin_error("Filter", plugin, st.message() or st.code.name), "Filter")
    return v


def checked_scores(plugin: str, point: str, got: Any, n: int) -> IntArray:
    """A Score plugin's (or its normalisation's) answer for ``n`` rows as
    int64, or :class:`PluginError`: one score per row, whole numbers
    (upstream's scores are int64; a float with a fraction is refused, not
    truncated)."""
    raw = np.asarray(got)
    if raw.shape != (n,):
        raise PluginError(plugin_error(point, plugin, f"returned {raw.size} scores for {n} nodes"), point)
    if raw.dtype.kind == "f":
        if not np.isfinite(raw).all() or (raw != np.round(raw)).any():
            bad = raw[~np.isfinite(raw) | (raw != np.round(raw))][0]
            raise PluginError(
                plugin_error(point, plugin, f"returned {bad!r}: scores are whole numbers (round them)"), point
            )
    elif raw.dtype.kind not in "iu":
        raise PluginError(plugin_error(point, plugin, f"returned {raw.dtype} scores, not integers"), point)
    return raw.astype(np.int64, copy=False)
