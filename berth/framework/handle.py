"""What a plugin may reach beyond its arguments (kube-scheduler's framework.Handle)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from berth.cache.cache import Cache

__all__ = ["Handle"]


@dataclasses.dataclass(slots=True, eq=False)
class Handle:
    """Services shared by the plugins of one profile.

    ``cache`` is the live cache (for plugins that keep pod indexes);
    ``extras`` carries what later subsystems register for their plugins
    (nominator, waiting pods, binder, pod groups) under typed accessors.
    """

    profile: str = "berth"
    cache: Cache | None = None
    clock: Callable[[], float] = time.monotonic
    extras: dict[str, Any] = dataclasses.field(default_factory=dict)
