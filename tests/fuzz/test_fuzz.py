"""The mutation fuzzers against an in-process Berth: no 5xx and no JSON-less
error over HTTP, no UNKNOWN or INTERNAL over gRPC, the canary's answers
unchanged and the cluster's invariants intact after every request.

``make test`` runs a bounded sample (1500 extender requests, 500 gRPC calls);
``make fuzz`` sets ``BERTH_FUZZ_HTTP`` and ``BERTH_FUZZ_GRPC`` to the long
counts. A failure prints the seed, the request's index, the mutations that
made it and the payload (truncated).
"""

from __future__ import annotations

import os

import pytest

from tests.fuzz import runner
from tests.fuzz.harness import Tally, count, run_seed, serving

HTTP_REQUESTS = count("BERTH_FUZZ_HTTP", 1500)
GRPC_CALLS = count("BERTH_FUZZ_GRPC", 500)

pytestmark = pytest.mark.fuzz


def _timeout(n: int, per_second: int) -> int:
    return max(120, 3 * n // per_second)


@pytest.mark.timeout(_timeout(HTTP_REQUESTS, 300))
async def test_extender_survives_mutated_requests_with_canary_and_invariants_intact() -> None:
    seed = run_seed(long_run="BERTH_FUZZ_HTTP" in os.environ)
    tally = Tally("HTTP extender", seed)
    async with serving() as target:
        await runner.fuzz_http(target, HTTP_REQUESTS, seed, tally)
    print(tally.summary())
    assert not tally.failures, tally.report()


@pytest.mark.timeout(_timeout(GRPC_CALLS, 100))
async def test_grpc_api_survives_mutated_messages_with_canary_and_invariants_intact() -> None:
    seed = run_seed(long_run="BERTH_FUZZ_GRPC" in os.environ)
    tally = Tally("gRPC", seed)
    async with serving() as target:
        await runner.fuzz_grpc(target, GRPC_CALLS, seed, tally)
    print(tally.summary())
    assert not tally.failures, tally.report()
