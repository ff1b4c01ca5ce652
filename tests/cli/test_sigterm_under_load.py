"""SIGTERM ends `berth serve` within its grace period however busy it is
(issue 28: under 50 clients the server sometimes went on answering for 90 s
after "shutting down"). Clients keep calling the extender, Explain and
Submit/Cancel while the signal arrives; the process must exit cleanly
within shutdownGracePeriodSeconds (10 s) and a small bound."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import grpc
import pytest

from berth.api.v1 import model_pb2, scheduler_pb2, scheduler_pb2_grpc
from tests.support import demo_berth_serve

#: Rounds (the full 20 of the issue run in `make soak`'s budget, not here).
ROUNDS = 3
GRACE = 10.0
BOUND = 5.0


def _load(http: int, grpc_port: int, stop: threading.Event, calls: list[int]) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
    stub = scheduler_pb2_grpc.SchedulerStub(channel)
    n = 0
    body = json.dumps(
        {
            "Pod": {"metadata": {"name": "x", "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}},
            "NodeNames": [f"node-{i:02d}" for i in range(50)],
        }
    ).encode()
    try:
        while not stop.is_set():
            n += 1
            pod = model_pb2.Pod(
                metadata=model_pb2.ObjectMeta(name=f"load-{threading.get_ident()}-{n}", namespace="default"),
                spec=model_pb2.PodSpec(
                    scheduler_name="berth", containers=[model_pb2.Container(name="c", requests={"cpu": 100})]
                ),
            )
            calls_of = (
                lambda pod=pod: stub.Submit(scheduler_pb2.SubmitRequest(pods=[pod]), timeout=2),
                lambda pod=pod: stub.Explain(scheduler_pb2.ExplainRequest(pod=pod), timeout=2),
                lambda pod=pod: stub.Cancel(
                    scheduler_pb2.CancelRequest(namespace="default", name=pod.metadata.name), timeout=2
                ),
                lambda: urllib.request.urlopen(
                    urllib.request.Request(
                        f"http://127.0.0.1:{http}/scheduler/filter",
                        data=body,
                        headers={"Content-Type": "application/json"},
                    ),
                    timeout=2,
                ).read(),
            )
            for call in calls_of:
                try:
                    call()
                    calls.append(1)
                except Exception:
                    time.sleep(0.01)  # refused while stopping: go on until told to stop
    finally:
        channel.close()


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_sigterm_under_load_exits_within_the_grace_period(round_: int) -> None:
    stop = threading.Event()
    calls: list[int] = []
    threads: list[threading.Thread] = []
    with demo_berth_serve() as (proc, http, grpc_port, _):
        threads = [threading.Thread(target=_load, args=(http, grpc_port, stop, calls), daemon=True) for _ in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while len(calls) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert calls, "the load never got through"
        signalled = time.monotonic()
        # Leaving the block sends SIGTERM and asserts exit status 0, no traceback.
    took = time.monotonic() - signalled
    stop.set()
    for t in threads:
        t.join(timeout=5)
    assert proc.returncode == 0
    assert took < GRACE + BOUND, f"exit took {took:.1f}s after SIGTERM"
