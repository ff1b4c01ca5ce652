"""GpuModelAffinity against small clusters built with berth.testing."""

from __future__ import annotations

import msgspec
import pytest
from berth_gpu_affinity import ERR_REASON, GpuModelAffinity, GpuModelAffinityArgs

from berth import testing
from berth.framework import Status
from berth.framework import model as k8s

GPU = "nvidia.com/gpu"
MODEL = "gpu.berth.dev/model"
REJECTED = Status.unresolvable(ERR_REASON, plugin="GpuModelAffinity")


def gpu_node(name: str, model: str | None, gpus: int = 8) -> k8s.Node:
    labels = {MODEL: model} if model else {}
    return testing.make_node(name, cpu="32", memory="256Gi", pods=110, allocatable={GPU: gpus}, labels=labels)


def gpu_pod(name: str = "train", *, models: str | None = None, gpus: int = 1, node_name: str = "") -> k8s.Pod:
    """A pod requesting ``gpus``, annotated with ``models`` when given."""
    pod = testing.make_pod(name, requests={"cpu": "1", GPU: gpus} if gpus else {"cpu": "1"}, node_name=node_name)
    if models is not None:
        pod.metadata.annotations[MODEL] = models
    return pod


@pytest.fixture
def cluster() -> testing.Cluster:
    """Two A100 nodes (one with 6 of 8 GPUs taken), an H100 node, a CPU node."""
    return testing.Cluster(
        nodes=[
            gpu_node("a100-busy", "a100"),
            gpu_node("a100-idle", "a100"),
            gpu_node("h100", "h100", gpus=4),
            gpu_node("cpu", None, gpus=0),
        ],
        pods=[gpu_pod("running", gpus=6, node_name="a100-busy")],
    )


@pytest.fixture
def plugin(cluster: testing.Cluster) -> GpuModelAffinity:
    return GpuModelAffinity(None, cluster.handle())


def test_only_nodes_of_the_requested_model_fit(cluster: testing.Cluster, plugin: GpuModelAffinity) -> None:
    assert cluster.filter(plugin, gpu_pod(models="a100")) == {
        "a100-busy": Status(),
        "a100-idle": Status(),
        "h100": REJECTED,
        "cpu": REJECTED,
    }


def test_a_list_of_models_accepts_any_of_them(cluster: testing.Cluster, plugin: GpuModelAffinity) -> None:
    verdicts = cluster.filter(plugin, gpu_pod(models="h100, a100"))
    assert {n for n, st in verdicts.items() if st.ok} == {"a100-busy", "a100-idle", "h100"}


def test_a_model_no_node_has_is_unresolvable(cluster: testing.Cluster, plugin: GpuModelAffinity) -> None:
    verdicts = cluster.filter(plugin, gpu_pod(models="mi300x"))
    assert set(verdicts.values()) == {REJECTED}
    assert REJECTED.code.name == "UNSCHEDULABLE_AND_UNRESOLVABLE"


@pytest.mark.parametrize("models", [None, "", " , "])
def test_pods_that_name_no_model_are_not_filtered(
    cluster: testing.Cluster, plugin: GpuModelAffinity, models: str | None
) -> None:
    assert all(st.ok for st in cluster.filter(plugin, gpu_pod(models=models)).values())


def test_the_node_label_is_configurable() -> None:
    cluster = testing.Cluster(
        nodes=[
            testing.make_node("old-label", labels={MODEL: "a100"}),
            testing.make_node("new-label", labels={"example.com/gpu": "a100"}),
        ]
    )
    plugin = GpuModelAffinity(GpuModelAffinityArgs(label_key="example.com/gpu"), cluster.handle())
    verdicts = cluster.filter(plugin, gpu_pod(models="a100"))
    assert verdicts == {"old-label": REJECTED, "new-label": Status()}


def test_score_prefers_the_most_free_gpus(cluster: testing.Cluster, plugin: GpuModelAffinity) -> None:
    # Free GPUs: a100-busy 2, a100-idle 8, h100 4, cpu 0; scaled so the best is 100.
    assert cluster.scores(plugin, gpu_pod(models="a100")) == {"a100-busy": 25, "a100-idle": 100, "h100": 50, "cpu": 0}
    assert cluster.scores(plugin, gpu_pod(), normalize=False)["a100-busy"] == 2


def test_least_free_packs_gpu_pods(cluster: testing.Cluster) -> None:
    plugin = GpuModelAffinity(GpuModelAffinityArgs(strategy="LeastFree"), cluster.handle())
    scores = cluster.scores(plugin, gpu_pod())
    assert scores["a100-busy"] > scores["h100"] > scores["a100-idle"]


def test_pods_without_gpus_are_not_scored(cluster: testing.Cluster, plugin: GpuModelAffinity) -> None:
    assert set(cluster.scores(plugin, gpu_pod(models="a100", gpus=0)).values()) == {0}


def test_args_are_camel_case_strict_and_validated() -> None:
    args = msgspec.convert({"labelKey": "example.com/gpu", "strategy": "LeastFree"}, GpuModelAffinityArgs)
    assert (args.label_key, args.annotation_key, args.strategy) == ("example.com/gpu", MODEL, "LeastFree")
    with pytest.raises(msgspec.ValidationError, match="unknown field `label`"):
        msgspec.convert({"label": "x"}, GpuModelAffinityArgs)
    with pytest.raises(msgspec.ValidationError, match="strategy"):
        msgspec.convert({"strategy": "Random"}, GpuModelAffinityArgs)
    with pytest.raises(ValueError, match="labelKey: 'not a key'"):
        GpuModelAffinityArgs(label_key="not a key").validate()
    GpuModelAffinityArgs().validate()
