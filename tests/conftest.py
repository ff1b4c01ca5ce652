"""Suite-wide checks."""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import AsyncIterator, Iterator

import pytest
from hypothesis import HealthCheck, settings

# Generated tests: a bounded sample in `make test` ("default"), long runs in
# `make fuzz` (HYPOTHESIS_PROFILE=fuzz). Tests leave max_examples to these
# profiles so one switch scales them all. No deadline: these 2-core machines
# are noisy, and speed is the benchmarks' job.
settings.register_profile("default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("fuzz", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def verify_cleanup(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail an async test that leaves asyncio tasks running (Home Assistant's
    ``verify_cleanup``): a task outliving its test is a leak in the code or
    the test, and would otherwise be destroyed silently with the loop."""
    if inspect.iscoroutinefunction(request.function):
        request.getfixturevalue("_no_task_left_behind")
    yield


@pytest.fixture(autouse=True)
def _own_state_home(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test's own ``$XDG_STATE_HOME`` (the default state directory of
    a standalone ``berth serve``, berth.store.default_dir; inherited by the
    processes it starts), so no test writes to the home directory or shares
    a store, and its single-writer lock, with another. Created only if used."""
    base = tmp_path_factory.getbasetemp() / "state-homes"
    name = "".join(c if c.isalnum() else "_" for c in request.node.nodeid)[-120:]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(base / name))
        yield


@pytest.fixture
async def _no_task_left_behind() -> AsyncIterator[None]:
    before = asyncio.all_tasks()
    yield
    for _ in range(3):  # let tasks cancelled by the test's own teardown finish
        await asyncio.sleep(0)
    current = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() - before if t is not current and not t.done()]
    for t in left:
        t.cancel()
    assert not left, f"tasks left running: {sorted(t.get_name() for t in left)}"
