"""The chart installs batch queues (`config.queues` in values, rendered into
the mounted BerthConfiguration, checked by values.schema.json), and mounts
the ConfigMap so that a running Berth sees queue changes without a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from berth import app, config, reload
from tests.core.test_config_reload import ConfigMapVolume
from tests.helm.conftest import CHART, NAMESPACE, HelmError, Render, run_helm, values_file
from tests.helm.test_chart import FULLNAME, SCENARIOS, berth_config, pod_spec, raw_config

QUEUES: list[dict[str, Any]] = [
    {
        "name": "research",
        "guaranteed": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": 8},
        "max": {"cpu": 128},
        "weight": 1,
    },
    {
        "name": "research-vision",
        "parent": "research",
        "guaranteed": {"cpu": "16"},
        "namespaces": ["vision", "vision-*"],
        "preemption": {"reclaim": False, "withinQueue": "Never"},
    },
    {"name": "batch.v2", "weight": 2.5, "max": {"cpu": "500m"}},
    {"name": "default"},
]


def with_queues(queues: list[dict[str, Any]], **values: Any) -> dict[str, Any]:
    return {**values, "config": {**values.get("config", {}), "queues": queues}}


@pytest.mark.parametrize("role", ["scheduler", "extender"])
def test_queues_in_values_are_the_queues_berth_reads(render: Render, role: str) -> None:
    r = render(with_queues(QUEUES, role=role, config={"podMaxBackoffSeconds": 20}))
    cfg = berth_config(r)  # config.parse: what `berth serve --config` accepts
    assert cfg.queues == config.parse({"queues": QUEUES}).queues
    assert [q.name for q in cfg.queues] == ["research", "research-vision", "batch.v2", "default"]
    assert cfg.pod_max_backoff_seconds == 20  # the rest of `config` still applies


def test_no_queues_renders_no_queues_section(render: Render) -> None:
    assert "queues" not in raw_config(render({}))
    assert berth_config(render({})).queues == []


def test_helm_lint_accepts_queues(helm: Path, kube_version: str, tmp_path: Path) -> None:
    values = values_file(tmp_path, with_queues(QUEUES))
    args = ["lint", str(CHART), "--strict", "--namespace", NAMESPACE, "--kube-version", kube_version]
    proc = run_helm(helm, *args, "--values", str(values))
    assert proc.returncode == 0, proc.stdout + proc.stderr


BAD_QUEUES: list[tuple[list[dict[str, Any]], str]] = [
    ([{"name": "bad_name"}], "config.queues.0.name: Does not match pattern"),
    ([{"name": "-a"}], "config.queues.0.name: Does not match pattern"),
    ([{"parent": "research"}], "config.queues.0: name is required"),
    ([{"name": "a", "colour": "red"}], "config.queues.0: Additional property colour is not allowed"),
    ([{"name": "a", "weight": 0}], "config.queues.0.weight: Must be greater than 0"),
    ([{"name": "a", "weight": "heavy"}], "config.queues.0.weight: Invalid type. Expected: number"),
    ([{"name": "a", "guaranteed": {"cpu": "lots"}}], "config.queues.0.guaranteed.cpu: Does not match pattern"),
    ([{"name": "a", "max": {"cpu": -1}}], "config.queues.0.max.cpu: Must be greater than or equal to 0"),
    ([{"name": "a", "max": {"cpu": "-1"}}], "config.queues.0.max.cpu: Does not match pattern"),
    ([{"name": "a", "max": ["cpu"]}], "config.queues.0.max: Invalid type. Expected: object"),
    ([{"name": "a", "namespaces": "vision"}], "config.queues.0.namespaces: Invalid type. Expected: array"),
    ([{"name": "a", "namespaces": [1]}], "config.queues.0.namespaces.0: Invalid type. Expected: string"),
    ([{"name": "a", "parent": 1}], "config.queues.0.parent: Invalid type. Expected: string"),
    (
        [{"name": "a", "preemption": {"withinQueue": "Always"}}],
        'config.queues.0.preemption.withinQueue must be one of the following: "LowerPriority", "Never"',
    ),
    ([{"name": "a", "preemption": {"reclaim": "yes"}}], "config.queues.0.preemption.reclaim: Invalid type"),
    ([{"name": "a", "preemption": {"evict": True}}], "config.queues.0.preemption: Additional property evict"),
    # Rules across entries, checked by the templates.
    ([{"name": "a"}, {"name": "a"}], 'config.queues[1].name: duplicate queue "a" (also config.queues[0])'),
    ([{"name": "a"}, {"name": "b", "parent": "c"}], 'config.queues[1].parent: no queue named "c"'),
]


@pytest.mark.parametrize(("queues", "message"), BAD_QUEUES, ids=[m for _, m in BAD_QUEUES])
def test_an_invalid_queue_is_refused_naming_it(render: Render, queues: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(HelmError) as e:
        render(with_queues(queues))
    assert message in str(e.value)


def test_helm_lint_refuses_an_invalid_queue(helm: Path, kube_version: str, tmp_path: Path) -> None:
    values = values_file(tmp_path, with_queues([{"name": "research", "weight": -1}]))
    args = ["lint", str(CHART), "--namespace", NAMESPACE, "--kube-version", kube_version]
    proc = run_helm(helm, *args, "--values", str(values))
    assert proc.returncode != 0
    assert "config.queues.0.weight: Must be greater than 0" in proc.stdout + proc.stderr


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_configmaps_are_mounted_whole_so_updates_reach_the_pods(render: Render, scenario: str) -> None:
    """The kubelet updates a ConfigMap volume in place; a subPath mount keeps
    the file it started with for the life of the container."""
    r = render(SCENARIOS[scenario])
    for deployment in r.all("Deployment"):
        spec = pod_spec(deployment)
        configmaps = {v["name"] for v in spec["volumes"] if "configMap" in v}
        for c in spec["containers"]:
            for m in c.get("volumeMounts", []):
                assert not (m["name"] in configmaps and "subPath" in m), (deployment["metadata"]["name"], m)


def test_a_running_berth_takes_the_queues_of_an_upgraded_release(render: Render, tmp_path: Path) -> None:
    """`helm upgrade` with new queues rewrites the ConfigMap; the kubelet swaps
    the mounted file; the running Berth applies the queues, and the pods are not
    rolled (the checksum leaves queues out)."""
    before, after = with_queues(QUEUES[:1]), with_queues(QUEUES)
    volume = ConfigMapVolume(tmp_path / "config")
    volume.publish(raw_config(render(before)))
    berth = app.build(config.load(volume.path), run_loop=False)
    reloader = reload.ConfigReloader(volume.path, berth.core)
    assert [s.name for s in berth.core.quota.status()] == ["research"]

    volume.publish(raw_config(render(after)))
    assert reloader.check() is True
    assert [s.name for s in berth.core.quota.status()] == [q["name"] for q in QUEUES]

    def pod_template(values: dict[str, Any]) -> Any:
        return render(values).one("Deployment", FULLNAME)["spec"]["template"]

    assert yaml.safe_dump(pod_template(before)) == yaml.safe_dump(pod_template(after))
