"""The contexts file: named connections to Berths, as kubeconfig's contexts.

``$BERTH_CONFIG``, else ``$XDG_CONFIG_HOME/berth/config``, else
``~/.config/berth/config``::

    apiVersion: berth.dev/v1
    kind: Config
    currentContext: prod
    contexts:
    - name: prod
      server: berth.example.com:443
      tls: {caFile: /etc/berth/ca.pem}     # {} : TLS with the system's CAs; absent: plaintext
      tokenFile: ~/.config/berth/prod.token
    - name: local
      server: localhost

``berth config set-context``, ``use-context``, ``get-contexts``,
``current-context``, ``delete-context`` and ``view`` keep it, so it is
rarely edited by hand; a file Berth cannot read is one line naming the
file and the field.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

import berth_client
from berth.cli import output

__all__ = ["Context", "Contexts", "describe_path", "load", "path", "register"]

PATH_ENV = "BERTH_CONFIG"
_TLS_KEYS = {"caFile": "ca_file", "certFile": "cert_file", "keyFile": "key_file", "serverName": "server_name"}
_CONTEXT_KEYS = ("name", "server", "tls", "tokenFile")


class ContextError(Exception):
    """The contexts file or a context name is unusable; ``berth: <message>``, exit 1."""


def path() -> Path:
    if os.environ.get(PATH_ENV):
        return Path(os.environ[PATH_ENV]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return Path(base) / "berth" / "config"


def describe_path() -> str:
    return f"${PATH_ENV} (default ~/.config/berth/config)"


@dataclasses.dataclass(frozen=True, slots=True)
class Context:
    name: str
    server: str
    tls: berth_client.Tls | None = None
    token_file: str | None = None

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "server": self.server}
        if self.tls is not None:
            doc["tls"] = {k: getattr(self.tls, a) for k, a in _TLS_KEYS.items() if getattr(self.tls, a)}
        if self.token_file:
            doc["tokenFile"] = self.token_file
        return doc


@dataclasses.dataclass(slots=True)
class Contexts:
    contexts: dict[str, Context] = dataclasses.field(default_factory=dict)
    current_name: str = ""

    def get(self, name: str) -> Context:
        ctx = self.contexts.get(name)
        if ctx is None:
            known = ", ".join(self.contexts) or f"none in {path()}"
            raise ContextError(f"context {name!r} not found (contexts: {known}; berth config set-context)")
        return ctx

    def current(self) -> Context | None:
        return self.contexts.get(self.current_name) if self.current_name else None

    def to_doc(self) -> dict[str, Any]:
        return {
            "apiVersion": "berth.dev/v1",
            "kind": "Config",
            "currentContext": self.current_name,
            "contexts": [c.to_doc() for c in self.contexts.values()],
        }

    def save(self) -> Path:
        """Written whole to a temporary file beside it, then renamed (mode 0600)."""
        import tempfile

        import yaml

        target = path()
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".config-")
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(self.to_doc(), f, sort_keys=False)
        os.replace(tmp, target)
        return target


def _context(doc: Any, where: str) -> Context:
    if not isinstance(doc, dict):
        raise ContextError(f"{where}: expected an object")
    unknown = sorted(set(doc) - set(_CONTEXT_KEYS))
    if unknown:
        raise ContextError(f"{where}.{unknown[0]}: unknown field (fields: {', '.join(_CONTEXT_KEYS)})")
    if not isinstance(doc.get("name"), str) or not doc["name"]:
        raise ContextError(f"{where}.name: required")
    if not isinstance(doc.get("server"), str) or not doc["server"]:
        raise ContextError(f"{where}.server: required")
    tls = None
    if "tls" in doc and doc["tls"] is not None:
        if not isinstance(doc["tls"], dict):
            raise ContextError(f"{where}.tls: expected an object ({{}} for the system's CAs)")
        extra = sorted(set(doc["tls"]) - set(_TLS_KEYS))
        if extra:
            raise ContextError(f"{where}.tls.{extra[0]}: unknown field (fields: {', '.join(_TLS_KEYS)})")
        tls = berth_client.Tls(**{a: _expand(doc["tls"].get(k)) for k, a in _TLS_KEYS.items()})
    return Context(doc["name"], doc["server"], tls, _expand(doc.get("tokenFile")))


def _expand(value: Any) -> str | None:
    return str(Path(value).expanduser()) if isinstance(value, str) and value else None


def load() -> Contexts:
    """The contexts file; empty when there is none."""
    p = path()
    try:
        text = p.read_text()
    except FileNotFoundError:
        return Contexts()
    except OSError as e:
        raise ContextError(f"{p}: {e.strerror or e}") from None
    import yaml  # only when there is a file: most commands start without it

    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ContextError(f"{p}: not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(doc, dict):
        raise ContextError(f"{p}: expected an object with contexts")
    out = Contexts(current_name=str(doc.get("currentContext") or ""))
    items = doc.get("contexts") or []
    if not isinstance(items, list):
        raise ContextError(f"{p}: contexts: expected a list")
    for i, item in enumerate(items):
        ctx = _context(item, f"{p}: contexts[{i}]")
        out.contexts[ctx.name] = ctx
    return out


# ---------------------------------------------------------------- berth config


def cmd_view(args: argparse.Namespace) -> int:
    output.emit(load().to_doc(), args.output)
    return 0


def cmd_get_contexts(args: argparse.Namespace) -> int:
    c = load()
    if args.output == "name":
        output.print_names("context", c.contexts)
        return 0
    rows = [["CURRENT", "NAME", "SERVER", "TLS", "TOKEN"]]
    for ctx in c.contexts.values():
        tls = "-" if ctx.tls is None else (ctx.tls.ca_file or "system CAs")
        rows.append(["*" if ctx.name == c.current_name else "", ctx.name, ctx.server, tls, ctx.token_file or "-"])
    output.print_table(rows)
    return 0


def cmd_current_context(args: argparse.Namespace) -> int:
    c = load()
    if not c.current_name:
        raise ContextError(f"no current context is set in {path()} (berth config use-context NAME)")
    print(c.current_name)
    return 0


def cmd_use_context(args: argparse.Namespace) -> int:
    c = load()
    c.get(args.name)
    c.current_name = args.name
    c.save()
    print(f'Switched to context "{args.name}".')
    return 0


def cmd_set_context(args: argparse.Namespace) -> int:
    c = load()
    old = c.contexts.get(args.name)
    server = args.server or (old.server if old else None)
    if not server:
        raise ContextError(f"context {args.name!r}: --server is required for a new context")
    berth_client.target(server)
    tls = old.tls if old else None
    if args.tls or args.ca_file or args.cert_file or args.key_file or args.server_name:
        tls = berth_client.Tls(args.ca_file, args.cert_file, args.key_file, args.server_name)
    token_file = args.token_file or (old.token_file if old else None)
    c.contexts[args.name] = Context(args.name, server, tls, token_file)
    if args.current or not c.current_name:
        c.current_name = args.name
    target = c.save()
    print(f'Context "{args.name}" {"modified" if old else "created"} in {target}.')
    return 0


def cmd_delete_context(args: argparse.Namespace) -> int:
    c = load()
    c.get(args.name)
    del c.contexts[args.name]
    if c.current_name == args.name:
        c.current_name = ""
    c.save()
    print(f'Deleted context "{args.name}".')
    return 0


def register(sub: Any, formatter: type[argparse.HelpFormatter]) -> None:
    """``berth config ...``."""
    cfg = sub.add_parser(
        "config",
        help="named connections to Berths (the contexts file), as kubectl config",
        formatter_class=formatter,
        description=f"The contexts file: {describe_path()}.",
        epilog="Examples:\n"
        "  berth config set-context prod --server berth.example.com:443 --ca-file ca.pem --token-file prod.token\n"
        "  berth config use-context prod\n"
        "  berth config get-contexts\n"
        "  berth get pods --context local      # one command against another context",
    )
    verbs = cfg.add_subparsers(dest="verb", required=True, metavar="VERB")
    v = verbs.add_parser(
        "view",
        help="print the contexts file",
        formatter_class=formatter,
        epilog="Examples:\n  berth config view -o json",
    )
    v.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml", help="yaml (default) or json")
    v.set_defaults(func=cmd_view)
    g = verbs.add_parser(
        "get-contexts",
        help="list the contexts; * marks the current one",
        formatter_class=formatter,
        epilog="Examples:\n  berth config get-contexts\n  berth config get-contexts -o name",
    )
    g.add_argument("-o", "--output", choices=("text", "name"), default="text", help="text (default): a table; name")
    g.set_defaults(func=cmd_get_contexts)
    verbs.add_parser(
        "current-context",
        help="print the current context's name",
        formatter_class=formatter,
        epilog="Examples:\n  berth config current-context",
    ).set_defaults(func=cmd_current_context)
    u = verbs.add_parser(
        "use-context",
        help="make NAME the current context",
        formatter_class=formatter,
        epilog="Examples:\n  berth config use-context prod",
    )
    u.add_argument("name", metavar="NAME")
    u.set_defaults(func=cmd_use_context)
    s = verbs.add_parser(
        "set-context",
        help="create or change a context",
        formatter_class=formatter,
        epilog="Examples:\n  berth config set-context local --server localhost\n"
        "  berth config set-context prod --server berth.example.com:443 --ca-file ca.pem --current",
    )
    s.add_argument("name", metavar="NAME")
    s.add_argument("--server", metavar="HOST[:PORT]", help="the server (port 50051 unless given)")
    s.add_argument("--tls", action="store_true", help="TLS with the system's CAs")
    s.add_argument("--ca-file", metavar="PEM", help="TLS, trusting this CA bundle")
    s.add_argument("--cert-file", metavar="PEM", help="client certificate")
    s.add_argument("--key-file", metavar="PEM", help="the client certificate's key")
    s.add_argument("--server-name", metavar="NAME", help="the name to expect in the server's certificate")
    s.add_argument("--token-file", metavar="FILE", help="the bearer token's file")
    s.add_argument("--current", action="store_true", help="also make it the current context")
    s.set_defaults(func=cmd_set_context)
    d = verbs.add_parser(
        "delete-context",
        help="remove a context",
        formatter_class=formatter,
        epilog="Examples:\n  berth config delete-context staging",
    )
    d.add_argument("name", metavar="NAME")
    d.set_defaults(func=cmd_delete_context)
