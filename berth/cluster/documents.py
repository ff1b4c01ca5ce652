"""Manifest documents before they become anything: decoded from YAML or
JSON with the keys written twice remembered, walked through ``List``
documents, and checked against the Kubernetes OpenAPI schema
(:mod:`berth.cluster.openapi`) as ``kubectl --validate`` has the API server
check them.

No model here, and nothing heavier than PyYAML: ``berth submit -f`` reads
manifests with this module alone and sends them through the client library
(``berth_client.objects``), while :mod:`berth.cluster.manifests` turns the
same documents into Berth's model for the embedded cluster.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

from berth import errors

if TYPE_CHECKING:
    import yaml

    from berth.cluster import openapi

__all__ = [
    "VALIDATION_MODES",
    "LazyList",
    "ManifestError",
    "ValidationMode",
    "check_fields",
    "decode",
    "describe",
    "iter_objects",
    "json_object",
    "yaml_loader",
]

#: Warnings about fields (``--validate=warn``) keep the name users filter them by.
log = logging.getLogger("berth.cluster.manifests")

#: kubectl's ``--validate`` values (the API server's ``fieldValidation``
#: Strict / Warn / Ignore): what an unknown or duplicate field does.
ValidationMode = Literal["strict", "warn", "ignore"]
VALIDATION_MODES: tuple[ValidationMode, ...] = get_args(ValidationMode)


class ManifestError(errors.InvalidArgument):
    """A manifest Berth cannot take; the message names document and field."""


@dataclasses.dataclass(slots=True)
class LazyList:
    """A ``List`` document whose items are decoded one at a time as they are
    walked: ``envelope`` is the document with ``"items": []``."""

    envelope: openapi.DecodedMapping
    items: Iterable[Any]


def iter_objects(docs: Iterable[Any], validate: ValidationMode, source: str) -> Iterator[tuple[str, Any]]:
    """(where, object) of every object in ``docs``: each document, or each
    item of a ``List`` (``kind: List`` or ``*List`` with ``items``), whose
    envelope is checked against the schema on the way."""
    for i, doc in enumerate(docs, start=1):
        where = f"document {i}"
        if doc is None:
            continue
        lazy_items: Iterable[Any] | None = None
        if isinstance(doc, LazyList):
            lazy: LazyList = doc
            doc, lazy_items = lazy.envelope, lazy.items
        if not isinstance(doc, Mapping):
            raise ManifestError(f"{where}: expected an object, got {type(doc).__name__}")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            # The envelope (apiVersion, kind, metadata); items one by one below.
            check_fields(doc, kind, f"{where} ({kind})", validate, source, skip=frozenset({"items"}))
            items: Iterable[Any] = lazy_items if lazy_items is not None else doc.get("items") or []
            if not isinstance(items, list | map):
                raise ManifestError(f"{where}: items must be a list")
            for j, item in enumerate(items):
                if not isinstance(item, Mapping):
                    raise ManifestError(f"{where} items[{j}]: expected an object")
                yield f"{where} items[{j}]", item
        else:
            yield where, doc


def describe(obj: Mapping[str, Any]) -> str:
    """``Pod team/web-0``: an object's kind and name, as errors name it."""
    md = obj.get("metadata") or {}
    name = md.get("name", "?") if isinstance(md, Mapping) else "?"
    ns = md.get("namespace") if isinstance(md, Mapping) else None
    return f"{obj.get('kind', '?')} {ns + '/' if ns else ''}{name}"


def check_fields(
    obj: Mapping[str, Any],
    kind: str,
    label: str,
    validate: ValidationMode,
    source: str,
    *,
    skip: frozenset[str] = frozenset(),
) -> Any:
    """``obj`` checked against the schema of ``kind``; what to decode.

    Strict raises every problem in one message, joined with ", " as the API
    server's strict decoding error is (k8s.io/apimachinery/pkg/runtime/error.go,
    ``strict decoding error: unknown field "spec.containers[0].resource",
    ...``); Berth adds the closest known field. Warn logs each unknown or
    duplicate field and returns the object without the unknown ones.
    """
    if validate == "ignore":
        return obj
    from berth.cluster import openapi  # here: commands that read no manifest do without the schema

    try:
        cleaned, problems = openapi.check(obj, kind, skip=skip)
    except RecursionError:
        raise ManifestError(f"{label}: nested too deeply") from None
    fatal = [p for p in problems if validate == "strict" or p.kind == "shape"]
    if fatal:
        raise ManifestError(errors.bounded(f"{label}: {', '.join(map(str, fatal))}"))
    for p in problems:
        effect = "the last value is used" if p.kind == "duplicate" else "left out"
        log.warning("%s%s: %s (--validate=warn: %s)", f"{source}: " if source else "", label, p, effect)
    return cleaned


@functools.cache
def yaml_loader() -> type[yaml.SafeLoader]:
    """PyYAML's safe loader, but mappings remember the keys written twice
    (PyYAML keeps the last value silently; the API server refuses them:
    ``json: duplicate field``). Built at first use: a client command that
    reads no YAML does not import PyYAML."""
    import yaml

    class YamlLoader(yaml.SafeLoader):
        pass

    YamlLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
    return YamlLoader


def _construct_map(loader: yaml.SafeLoader, node: yaml.MappingNode) -> Iterator[openapi.DecodedMapping]:
    from berth.cluster import openapi

    data = openapi.DecodedMapping()
    yield data  # first, so recursive structures (anchors) resolve, as SafeConstructor does
    # Merge keys (`<<: *base`) may be overridden; only keys written in this mapping count.
    own = [k for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"]
    data.update(loader.construct_mapping(node))
    seen: set[Any] = set()
    for key_node in own:
        key = loader.construct_object(key_node)  # already built: from the constructor's cache
        try:
            if key in seen:
                data.duplicates.append((key, key_node.start_mark.line + 1))
            seen.add(key)
        except TypeError:  # unhashable: construct_mapping has refused it already
            pass


def json_object(pairs: list[tuple[str, Any]]) -> openapi.DecodedMapping:
    """``json.loads``' ``object_pairs_hook``: a mapping that remembers its duplicate keys."""
    from berth.cluster import openapi

    counts = collections.Counter(k for k, _ in pairs)
    return openapi.DecodedMapping(pairs, [(k, None) for k, n in counts.items() if n > 1])


def decode(text: str, source: str) -> list[Any]:
    """The documents of YAML (any number of them) or JSON text (an object
    or an array of objects), duplicate keys remembered; ManifestError
    naming ``source`` when the text is neither."""
    try:
        if text.lstrip().startswith(("{", "[")):
            data = json.loads(text, object_pairs_hook=json_object)
            return data if isinstance(data, list) else [data]
    except json.JSONDecodeError as e:
        raise ManifestError(errors.bounded(f"{source}: not valid YAML or JSON: {e}")) from None
    except RecursionError:
        raise ManifestError(f"{source}: nested too deeply") from None
    import yaml

    try:
        return list(yaml.load_all(text, Loader=yaml_loader()))  # a SafeLoader subclass
    except yaml.YAMLError as e:
        raise ManifestError(errors.bounded(f"{source}: not valid YAML or JSON: {e}")) from None
    except RecursionError:
        raise ManifestError(f"{source}: nested too deeply") from None
