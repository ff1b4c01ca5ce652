"""Fixtures for the Helm chart tests: the helm binary, the pinned Kubernetes
version, and rendering the chart with given values.

helm is never installed by hand: ``tests/e2e/controlplane/build.sh`` builds it
(with kube-apiserver, kube-scheduler and etcd) from Go modules, and
``bed.find_binaries()`` finds the result. Without it these tests skip — except
under ``CI=true``, where a missing helm is a failure.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml

from tests.e2e.controlplane.bed import Kube

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "berth"
RELEASE = "sched"
NAMESPACE = "berth-system"

CI = os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail under CI=true, where every test must run."""
    if CI:
        pytest.fail(f"{reason} (CI=true: the end-to-end binaries must be built; run `make e2e-deps`)")
    pytest.skip(reason)


def _bed() -> Any:
    try:
        return importlib.import_module("tests.e2e.controlplane.bed")
    except ImportError as e:
        raise LookupError(f"tests/e2e/controlplane/bed.py cannot be imported ({e})") from None


def _binary(found: Any, name: str) -> Path | None:
    """find_binaries() may answer a mapping or an object; "kube-scheduler" or kube_scheduler."""
    for key in (name, name.replace("-", "_")):
        path = found.get(key) if isinstance(found, Mapping) else getattr(found, key, None)
        if path:
            return Path(path)
    return None


def find_binary(name: str) -> Path:
    """A binary the project's e2e build produced, or LookupError saying why not."""
    bed = _bed()
    try:
        found = bed.find_binaries()
    except Exception as e:  # the bed says why (not built, wrong version, ...)
        raise LookupError(f"{name} is not built: {e}") from None
    path = _binary(found, name)
    if path is None or not path.is_file():
        raise LookupError(f"{name} is not among the built binaries ({found!r}); run `make e2e-deps`")
    return path


def pinned_kubernetes_version() -> str:
    """The Kubernetes version the test bed pins; the chart's annotation otherwise."""
    try:
        bed = _bed()
    except LookupError:
        bed = None
    for attr in ("KUBERNETES_VERSION", "K8S_VERSION", "VERSION"):
        value = getattr(bed, attr, None)
        if isinstance(value, str) and value:
            return value if value.startswith("v") else f"v{value}"
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    return str(chart["annotations"]["berth.dev/tested-kubernetes-version"])


@pytest.fixture(scope="session")
def helm() -> Path:
    try:
        return find_binary("helm")
    except LookupError as e:
        unavailable(f"helm is not available: {e}")


@pytest.fixture(scope="session")
def kube_version() -> str:
    return pinned_kubernetes_version()


class HelmError(Exception):
    pass


@dataclass
class Rendered:
    """The objects of one `helm template`."""

    docs: list[dict[str, Any]]
    values: dict[str, Any]

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str | None = None, namespace: str | None = None) -> dict[str, Any]:
        found = [
            d
            for d in self.all(kind)
            if (name is None or d["metadata"]["name"] == name)
            and (namespace is None or d["metadata"].get("namespace") == namespace)
        ]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {[d['metadata']['name'] for d in found]}"
        return found[0]

    def kinds(self) -> set[tuple[str, str]]:
        return {(d["kind"], d["metadata"]["name"]) for d in self.docs}


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120, check=False)


def values_file(tmp: Path, values: Mapping[str, Any]) -> Path:
    text = yaml.safe_dump(dict(values), sort_keys=True)
    path = tmp / f"values-{hashlib.sha256(text.encode()).hexdigest()[:16]}.yaml"
    path.write_text(text)
    return path


Render = Callable[..., Rendered]


@pytest.fixture(scope="session")
def render(helm: Path, kube_version: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Render]:
    """render(values, chart=, release=, namespace=, api_versions=) -> Rendered;
    raises HelmError with helm's stderr. ``api_versions``: what the cluster
    serves beyond Kubernetes' own (helm's --api-versions)."""
    tmp = tmp_path_factory.mktemp("helm-values")
    cache: dict[str, Rendered] = {}

    def _render(
        values: Mapping[str, Any] | None = None,
        *,
        chart: Path = CHART,
        release: str = RELEASE,
        namespace: str = NAMESPACE,
        api_versions: tuple[str, ...] = (),
    ) -> Rendered:
        values = dict(values or {})
        key = f"{chart}\n{release}\n{namespace}\n{api_versions}\n{yaml.safe_dump(values, sort_keys=True)}"
        if key not in cache:
            proc = run_helm(
                helm,
                "template",
                release,
                str(chart),
                "--namespace",
                namespace,
                "--kube-version",
                kube_version,
                "--values",
                str(values_file(tmp, values)),
                *(f"--api-versions={v}" for v in api_versions),
            )
            if proc.returncode != 0:
                raise HelmError(proc.stderr.strip())
            docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
            cache[key] = Rendered(docs, values)
        return cache[key]

    yield _render


# ---------------------------------------------------------------- the real kube-apiserver


def _first_attr(obj: Any, names: Iterable[str]) -> Any:
    for name in names:
        value = getattr(obj, name, None)
        if callable(value) and not isinstance(value, type):
            value = value()
        if value:
            return value
    return None


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """etcd + kube-apiserver on loopback, from tests/e2e/controlplane/bed.py."""
    try:
        bed = _bed()
        binaries = bed.find_binaries()
    except Exception as e:
        unavailable(f"the end-to-end control plane is not available: {e}")
    cp_class = getattr(bed, "ControlPlane", None)
    if cp_class is None:
        unavailable("tests/e2e/controlplane/bed.py has no ControlPlane yet")
    workdir = tmp_path_factory.mktemp("controlplane")
    attempts: list[Callable[[], Any]] = [
        lambda: cp_class(binaries=binaries, workdir=workdir),
        lambda: cp_class(binaries),
        lambda: cp_class(),
    ]
    for attempt in attempts:
        try:
            cp = attempt()
            break
        except TypeError:
            continue
    else:
        pytest.fail(f"cannot construct {cp_class!r}")
    with cp as running:
        yield running if running is not None else cp


@pytest.fixture(scope="module")
def admin_kubeconfig(control_plane: Any) -> Path:
    kubeconfig = _first_attr(control_plane, ("admin_kubeconfig", "kubeconfig", "kubeconfig_path"))
    assert kubeconfig, f"cannot find the admin kubeconfig of {control_plane!r}"
    return Path(kubeconfig)


@pytest.fixture(scope="module")
def kube(admin_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Kube:
    """An admin client of the test bed."""
    return Kube.from_kubeconfig(admin_kubeconfig, tmp_path_factory.mktemp("kube"))
