"""What every door (the extender's HTTP port, the dashboard, gRPC) asks of
its configuration before it listens: is the address loopback, and can the
credential files be read. Shared by the adapters, which may not import one
another (import-linter's independence contract)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from berth.config import ConfigError

__all__ = ["is_loopback", "read_file", "read_token"]


def is_loopback(host: str) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ::1; all-interfaces ("",
    0.0.0.0, ::) and every other name or address are not loopback."""
    host = host.strip().removeprefix("[").removesuffix("]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_file(field: str, path: str) -> bytes:
    """The bytes of ``path``, or ConfigError ``field: cannot read path: why``."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"{field}: cannot read {path}: {e.strerror or e}") from None


def read_token(field: str, path: str | None) -> bytes | None:
    """The token in ``path`` (surrounding whitespace dropped; None: no file
    configured); ConfigError naming ``field`` when it cannot be read or is empty."""
    if path is None:
        return None
    token = read_file(field, path).strip()
    if not token:
        raise ConfigError(f"{field}: {path} is empty")
    return token
