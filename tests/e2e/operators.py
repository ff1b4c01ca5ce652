"""Out-of-tree controllers (LeaderWorkerSet, JobSet) run beside the bed.

Each is built by a ``build-<name>.sh`` under tests/e2e/controlplane from its
published Go module, pinned by a wrapper module of the same name there, into
``$BERTH_E2E_CACHE/shared/<name>/<version>/`` with its CRDs (``crd/``) and
webhook manifests (``webhook/``) copied beside the binary. Both are
controller-runtime managers with a ``config.<project>/v1alpha1``
Configuration: :func:`running` starts one with its webhooks on 127.0.0.1
(a certificate from tests/certs.py, internal cert management off) and
registers the project's own webhook configurations with ``url:``
clientConfigs (:func:`webhook_configurations`), so paths, rules and
objectSelectors are the project's, not guessed.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import os
import re
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.certs import CA
from tests.e2e.conftest import unavailable, wait_for
from tests.e2e.controlplane import bed

CONTROLPLANE = Path(__file__).parent / "controlplane"


def built_dir(name: str, module: str) -> Path:
    """``build-<name>.sh``'s output for the version the wrapper module
    ``controlplane/<name>/go.mod`` pins of ``module`` (the binary, CRDs, webhook manifests)."""
    wrapper = CONTROLPLANE / name / "go.mod"
    pinned = re.search(rf"^(?:require)?\s*{re.escape(module)} (v\S+)$", wrapper.read_text(), re.M)
    assert pinned, f"{wrapper} does not require {module}"
    root = os.environ.get("BERTH_E2E_CACHE") or str(Path.home() / ".cache" / "berth-e2e")
    return Path(root) / "shared" / name / pinned.group(1)


def established(kube: bed.Kube, crd: Mapping[str, Any]) -> None:
    name = crd["metadata"]["name"]

    def check() -> bool:
        got = kube.ok("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        return any(
            c["type"] == "Established" and c["status"] == "True" for c in got.get("status", {}).get("conditions", [])
        )

    wait_for(f"CRD {name} established", check)


def install_crds(kube: bed.Kube, paths: Iterable[Path], kinds: Iterable[tuple[str, str]]) -> None:
    """Create and establish each CRD, then wait until discovery serves every
    ``(apiVersion, kind)`` of ``kinds`` (discovery lags Established)."""
    for path in paths:
        crd = yaml.safe_load(path.read_text())
        kube.create(crd)
        established(kube, crd)
    wanted = list(kinds)

    def discovered() -> bool:
        kube.rediscover()
        served = kube.served()
        return all(k in served for k in wanted)

    wait_for(f"{', '.join(k for _, k in wanted)} in discovery", discovered)


def webhook_configurations(webhook_dir: Path, url: str, ca_bundle: bytes, prefix: str) -> list[dict[str, Any]]:
    """The project's Mutating/ValidatingWebhookConfigurations as its
    kustomization builds them (manifests.yaml with the patches that add
    objectSelectors), each named ``<prefix>-<name>`` and each webhook's
    ``service`` replaced by ``url`` + its path."""
    docs = [d for d in yaml.safe_load_all((webhook_dir / "manifests.yaml").read_text()) if d]
    kustomization = yaml.safe_load((webhook_dir / "kustomization.yaml").read_text())
    for patch in kustomization.get("patches", []):
        target = next(d for d in docs if d["kind"] == patch["target"]["kind"])
        for op in yaml.safe_load((webhook_dir / patch["path"]).read_text()):
            head = "/webhooks/"
            assert op["op"] == "replace" and op["path"].startswith(head), f"unexpected patch {op}"
            target["webhooks"][int(op["path"][len(head) :])] = op["value"]
    for doc in docs:
        doc["metadata"]["name"] = f"{prefix}-{doc['metadata']['name']}"
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{url}{path}", "caBundle": base64.b64encode(ca_bundle).decode()}
    return docs


def alive(proc: bed.Process) -> bool:
    if not proc.alive():
        raise AssertionError(f"{proc.name} exited ({proc.proc.returncode}):\n{proc.tail()}")
    return True


@dataclasses.dataclass(frozen=True, slots=True)
class Controller:
    """An out-of-tree controller-runtime manager ``build-<name>.sh`` builds."""

    name: str  #: its build script's and wrapper module's name (``build-<name>.sh``, ``controlplane/<name>/``)
    module: str  #: the Go module the wrapper pins
    binary: str
    config_api: str  #: its Configuration's apiVersion

    @property
    def home(self) -> Path:
        return built_dir(self.name, self.module)


@contextlib.contextmanager
def running(
    control_plane: bed.ControlPlane,
    work: Path,
    controller: Controller,
    *,
    kinds: Iterable[tuple[str, str]],
    namespace: str,
    kcm_controllers: Sequence[str],
    answering: Callable[[], bool],
    more_crds: Iterable[Path] = (),
    extra_config: Mapping[str, Any] | None = None,
) -> Iterator[bed.Process]:
    """The controller's CRDs and ``more_crds`` installed (``kinds`` served),
    ``namespace`` made, kube-controller-manager running ``kcm_controllers``,
    and the controller itself running against the bed with a Configuration
    of its ``config_api``: leader election and internal cert management off,
    webhooks on 127.0.0.1 with a certificate made here, no metrics,
    ``extra_config`` merged in. Its webhook configurations are registered
    once it is ready, and it is yielded once ``answering()`` (a request that
    passes through its webhooks) succeeds; on exit all of it is stopped or removed."""
    home, binary = controller.home, controller.binary
    if not (home / binary).is_file():
        script = f"build-{controller.name}.sh"
        unavailable(f"{binary} not built in {home}: run `make e2e-deps` (tests/e2e/controlplane/{script})")
    kube = control_plane.kube()
    install_crds(kube, [*sorted((home / "crd").glob("*.yaml")), *more_crds], kinds)
    control_plane.ensure_namespace(namespace)
    kcm = control_plane.start_controller_manager(kcm_controllers)
    registered: list[dict[str, Any]] = []
    manager: bed.Process | None = None
    try:
        ca = CA(work, f"{binary}-webhook-ca")
        serving = ca.issue(f"{binary}-webhook", server=True, hosts=("127.0.0.1",))
        certs = work / "certs"
        certs.mkdir()
        # controller-runtime's webhook server reads tls.crt and tls.key from certDir.
        (certs / "tls.crt").write_bytes(serving.cert.read_bytes())
        (certs / "tls.key").write_bytes(serving.key.read_bytes())
        webhook_port, probe_port = bed.free_port(), bed.free_port()
        config = {
            "apiVersion": controller.config_api,
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(certs)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
            "metrics": {"bindAddress": "0"},  # controller-runtime: "0" serves no metrics
            **(extra_config or {}),
        }
        config_path = work / f"{binary}-config.yaml"
        config_path.write_text(yaml.safe_dump(config))
        proc = manager = control_plane._spawn(
            binary,
            [str(home / binary), f"--config={config_path}", "--zap-log-level=info"],
            {"KUBECONFIG": str(control_plane.admin_kubeconfig)},
        )
        wait_for(
            f"{binary} /readyz",
            lambda: (
                alive(proc) and urllib.request.urlopen(f"http://127.0.0.1:{probe_port}/readyz", timeout=1).status == 200
            ),
            60,
        )
        url = f"https://127.0.0.1:{webhook_port}"
        for cfg in webhook_configurations(home / "webhook", url, ca.path.read_bytes(), controller.name):
            kube.create(cfg)
            registered.append(cfg)
        # Ready is not serving: wait until a request passes through its webhooks.
        wait_for(f"{binary}'s webhooks answering", lambda: alive(proc) and answering(), 60)
        yield proc
    finally:
        for cfg in registered:
            with contextlib.suppress(Exception):
                kube.delete(cfg)
        if manager is not None:
            manager.stop()
        kcm.stop()
