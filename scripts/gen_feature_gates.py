"""Regenerate berth/features/kube_features.json: for each supported Kubernetes
release, every feature gate its kube-scheduler knows with the default,
maturity and lock that release gives it, read from the released source of
``k8s.io/kubernetes`` (``pkg/features/kube_features.go``,
``defaultVersionedKubernetesFeatureGates``, evaluated at the release's own
minor version as ``featuregate.VersionedSpecs`` is).

Usage: python scripts/gen_feature_gates.py

Each release's source is read from the Go module cache
(``go mod download k8s.io/kubernetes@vX.Y.Z`` puts it there; building the e2e
bed of that version does too). Not run by ``make test``; the JSON is
committed, and tests/core/test_features.py checks what Berth reads from it.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

#: The release whose source gives each minor's table (the e2e wrappers' pins).
RELEASES = ("v1.35.4", "v1.36.3", "v1.37.2")
OUT = Path(__file__).resolve().parent.parent / "berth" / "features" / "kube_features.json"

_CONST = re.compile(r'^\t(\w+)\s+featuregate\.Feature\s*=\s*"([^"]+)"', re.M)
_GATE = re.compile(r"^\t(?:(\w+)\.)?(\w+): \{\n(.*?)^\t\},", re.M | re.S)
_SPEC = re.compile(
    r'\{Version: version\.MustParse\("(\d+)\.(\d+)"\), Default: (true|false), '
    r"PreRelease: featuregate\.(\w+)(?:, LockToDefault: (true|false))?\}"
)


def module_dir(release: str) -> Path:
    gomodcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout
    path = Path(gomodcache.strip()) / f"k8s.io/kubernetes@{release}"
    if not path.is_dir():
        subprocess.run(["go", "mod", "download", f"k8s.io/kubernetes@{release}"], check=True, cwd="/")
    return path


def gates_of(release: str) -> dict[str, list[object]]:
    """Gate -> [default, preRelease, lockToDefault] at ``release``'s minor."""
    minor = int(release.split(".")[1])
    src = (module_dir(release) / "pkg/features/kube_features.go").read_text()
    names = dict(_CONST.findall(src))
    start = src.index("var defaultVersionedKubernetesFeatureGates")
    body = src[start : src.index("\n}\n", start) + 3]
    gates: dict[str, list[object]] = {}
    for pkg, const, specs in _GATE.findall(body):
        name = const if pkg else names.get(const, const)
        rows = _SPEC.findall(specs)
        if not rows:
            raise SystemExit(f"{release}: gate {name}: no versioned spec parsed")
        # VersionedSpecs: the last spec whose version is not newer than ours.
        current = [r for r in rows if (int(r[0]), int(r[1])) <= (1, minor)]
        if not current:
            continue  # introduced after this release
        _, _, default, pre, lock = current[-1]
        gates[name] = [default == "true", pre, lock == "true"]
    return dict(sorted(gates.items()))


def main() -> None:
    releases = {}
    for release in RELEASES:
        minor = ".".join(release.removeprefix("v").split(".")[:2])
        releases[minor] = {
            "source": f"k8s.io/kubernetes {release} pkg/features/kube_features.go",
            "gates": gates_of(release),
        }
    doc = {"columns": ["default", "preRelease", "lockToDefault"], "releases": releases}
    # One gate a line: small diffs when a release is added.
    lines = json.dumps(doc, separators=(",", ":")).replace('],"', '],\n"')
    OUT.write_text(lines + "\n")
    for minor, rel in releases.items():
        print(f"{OUT}: {minor}: {len(rel['gates'])} gates")


if __name__ == "__main__":
    main()
