"""The stores themselves (berth.store): what one writes another open of the
same store reads back, the epoch, one commit per batch, one writer — for
each durable backend (sqlite, and postgres on a real server)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from berth.config import StateConfig
from berth.errors import FailedPrecondition
from berth.framework.decision import Decision, DecisionKind, Reason
from berth.store import MemoryStore, SqliteStore, StateStore, new_store
from berth.testing import make_node, make_pod


def decision(i: int) -> Decision:
    return Decision(DecisionKind.BOUND, f"team/p{i}", f"u{i}", "n0", "", (Reason("NodeResourcesFit", "cpu"),), 1, i)


async def write_some(store: StateStore) -> None:
    store.put("nodes", "n0", make_node("n0", cpu="4"))
    store.put("nodes", "n1", make_node("n1", cpu="4"))
    store.put("pods", "team/a", make_pod("a", namespace="team", node_name="n0"))
    store.delete("nodes", "n1")
    for i in range(1, 6):
        store.append_decision(i, decision(i))
    store.trim_decisions(3)
    await store.sync()


async def test_a_reopened_store_holds_what_was_committed_and_keeps_its_epoch(
    durable: Callable[[], StateStore],
) -> None:
    first = durable()
    snap = await first.open()
    assert snap.created and snap.epoch == first.epoch
    await write_some(first)
    await first.close()
    again = durable()
    snap2 = await again.open()
    try:
        assert not snap2.created
        assert snap2.epoch == snap.epoch
        assert list(snap2.objects["nodes"]) == ["n0"]
        assert snap2.objects["pods"]["team/a"] == make_pod("a", namespace="team", node_name="n0")
        assert [s for s, _ in snap2.decisions] == [3, 4, 5]
        assert snap2.decisions[0][1] == decision(3)
    finally:
        await again.close()


async def test_a_memory_store_reopened_keeps_its_objects_and_a_new_one_has_a_new_epoch() -> None:
    store = MemoryStore()
    await store.open()
    await write_some(store)
    snap = await store.open()
    assert not snap.created and list(snap.objects["nodes"]) == ["n0"]
    assert [s for s, _ in snap.decisions] == [3, 4, 5]
    assert MemoryStore().epoch != store.epoch


async def test_a_wiped_sqlite_store_gets_a_new_epoch(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a")
    epoch = (await store.open()).epoch
    await store.close()
    (tmp_path / "a" / "state.db").unlink()
    again = SqliteStore(tmp_path / "a")
    try:
        snap = await again.open()
        assert snap.created and snap.epoch != epoch
    finally:
        await again.close()


async def test_writes_between_two_commits_are_one_commit_and_the_last_write_wins(
    durable: Callable[[], StateStore],
) -> None:
    store = durable()
    await store.open()
    try:
        for i in range(5000):
            store.put("pods", f"team/p{i % 100}", make_pod(f"p{i % 100}", namespace="team", uid=f"v{i}"))
        await store.sync()
        assert getattr(store, "commits", None) == 1
        await store.sync()  # nothing pending: no commit
        assert getattr(store, "commits", None) == 1
    finally:
        await store.close()
    again = durable()
    try:
        snap = await again.open()
        assert len(snap.objects["pods"]) == 100
        assert snap.objects["pods"]["team/p7"].metadata.uid == "v4907"  # type: ignore[attr-defined]
    finally:
        await again.close()


async def test_a_second_writer_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    first = SqliteStore(tmp_path)
    await first.open()
    second = SqliteStore(tmp_path)
    try:
        with pytest.raises(FailedPrecondition, match="in use by another berth serve"):
            await second.open()
    finally:
        await second.close()
        await first.close()


@pytest.mark.parametrize(
    ("cfg", "default", "backend"),
    [
        (StateConfig(), "memory", "memory"),
        (StateConfig(), "sqlite", "sqlite"),
        (StateConfig(backend="memory"), "sqlite", "memory"),
        (StateConfig(backend="sqlite", dir="/tmp/x"), "memory", "sqlite"),
    ],
)
def test_the_configuration_names_the_store_else_the_mode_does(cfg: StateConfig, default: str, backend: str) -> None:
    assert new_store(cfg, default_backend=default).backend == backend
