"""``-f FILE``: the manifests ``submit``, ``explain`` and ``whatif`` send.

Read with :mod:`berth.cluster.documents` (decoded, Lists walked, fields
checked against the Kubernetes schema as ``--validate`` says) and turned
into the contract's messages by the client library
(:func:`berth_client.objects.message`), every one before anything is sent:
a manifest Berth cannot take is one line naming file, document and field,
and exit status 2. Nothing here loads Berth's model.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import berth_client
from berth.cluster import documents

__all__ = ["add_validate_option", "read"]


def add_validate_option(p: argparse.ArgumentParser) -> None:
    # kubectl's flag, values and default (kubectl apply --validate=strict).
    p.add_argument(
        "--validate",
        choices=documents.VALIDATION_MODES,
        default="strict",
        help="unknown or duplicate fields in manifests: strict (default) refuses the file, "
        "warn logs each and leaves it out, ignore skips the check",
    )


def _text(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    p = Path(path)
    try:
        return p.read_text(), str(p)
    except OSError as e:
        raise documents.ManifestError(f"{p}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise documents.ManifestError(f"{p}: not UTF-8 text: {e.reason} at byte {e.start}") from None


def read(path: str, validate: documents.ValidationMode, kinds: tuple[str, ...]) -> list[Any]:
    """The objects of the file (``-``: stdin) as ``berth.v1`` messages, in
    file order; only ``kinds`` may appear. Raises ManifestError."""
    text, source = _text(path)
    out: list[Any] = []
    for where, obj in documents.iter_objects(documents.decode(text, source), validate, source):
        label = f"{where} ({documents.describe(obj)})"
        kind = obj.get("kind")
        try:
            if kind not in kinds:
                what = f"kind {kind!r} is not one of" if kind else "kind: required, one of"
                raise documents.ManifestError(f"{label}: {what} {', '.join(kinds)}")
            checked: Mapping[str, Any] = documents.check_fields(obj, kind, label, validate, source)
            out.append(berth_client.objects.message(checked))
        except (berth_client.ManifestError, berth_client.QuantityError) as e:
            raise documents.ManifestError(f"{source}: {label}: {e}") from None
        except documents.ManifestError as e:
            raise documents.ManifestError(f"{source}: {e}") from None
    return out
