"""A bound pod's info (its requests, worked out from every container) is
computed once when a source applies it: the one admit_pods computed to
check the batch is the one the cache counts (restoring 50 000 bound pods
spent a third of its time computing each twice)."""

from __future__ import annotations

import msgspec
import pytest

from berth import app, config
from berth.cache import infos
from berth.testing import make_node, make_pod


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = infos.PodInfo.of.__func__  # type: ignore[attr-defined]

    def of(cls: type[infos.PodInfo], pod: object, **kw: object) -> infos.PodInfo:
        calls.append(pod.metadata.name)  # type: ignore[attr-defined]
        return real(cls, pod, **kw)  # type: ignore[no-any-return]

    monkeypatch.setattr(infos.PodInfo, "of", classmethod(of))
    return calls


def test_each_bound_pod_of_a_batch_is_worked_out_once(counted: list[str]) -> None:
    berth = app.build(config.parse({}))
    berth.cluster.upsert_nodes([make_node("n", cpu="8", pods=110)])
    berth.cluster.upsert_pods([make_pod(f"p{i}", node_name="n", requests={"cpu": "100m"}) for i in range(5)])
    assert sorted(counted) == [f"p{i}" for i in range(5)]
    assert berth.core.cache.node_info("n") is not None and len(berth.core.cache.node_info("n").pods) == 5  # type: ignore[union-attr]


def test_a_pod_applied_that_was_not_the_admitted_object_is_worked_out_anew(counted: list[str]) -> None:
    berth = app.build(config.parse({}))
    berth.cluster.upsert_nodes([make_node("n", cpu="8", pods=110)])
    pod = make_pod("p", node_name="n", requests={"cpu": "1"})
    berth.core.admit_pods([pod])
    # A different (equal) object reaches on_pod: it is not taken for the admitted one.
    berth.core.on_pod(msgspec.structs.replace(pod), source=berth.cluster)
    assert counted == ["p", "p"]
    info = berth.core.cache.get_pod(pod.metadata.uid)
    assert info is not None and info.requests["cpu"] == 1000
