"""The blocking client: :class:`~berth_client.AsyncClient`'s calls for code
without an event loop (scripts, the ``berth`` CLI).

It runs one AsyncClient on a private event loop in a daemon thread and
waits for each call there, so both clients share every line of their
behaviour (retries, deadlines, the watch's resumption, :meth:`wait`).
Use it from any thread, including one that runs an event loop of its own.

    with berth_client.Client("berth.example") as berth:
        for row in berth.list_pods("batch"):
            print(row.name, row.phase)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from berth_client import outcomes
from berth_client.aio import AsyncClient, GroupLike, PodLike
from berth_client.api.v1 import cluster_pb2 as cpb
from berth_client.api.v1 import scheduler_pb2 as spb
from berth_client.connection import DEFAULT_RETRY, Retry, Settings, Tls

__all__ = ["Client"]

T = TypeVar("T")


async def _next(stream: AsyncIterator[T]) -> T:
    return await anext(stream)


class Client:
    """A blocking connection to one Berth; the same arguments and calls as
    :class:`~berth_client.AsyncClient`. Close it (or use ``with``)."""

    def __init__(
        self,
        server: str = "localhost",
        *,
        tls: Tls | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        retry: Retry = DEFAULT_RETRY,
    ) -> None:
        self.aio = AsyncClient(server, tls=tls, token=token, timeout=timeout, retry=retry)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="berth-client", daemon=True)
        self._thread.start()

    @classmethod
    def from_settings(cls, settings: Settings) -> Client:
        return cls(
            settings.server, tls=settings.tls, token=settings.token, timeout=settings.timeout, retry=settings.retry
        )

    @property
    def settings(self) -> Settings:
        return self.aio.settings

    @property
    def address(self) -> str:
        return self.aio.address

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._run(self.aio.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # KeyboardInterrupt and the like: stop the call too
            raise

    # ------------------------------------------------------------ reads

    def list_nodes(self) -> list[cpb.NodeSummary]:
        return self._run(self.aio.list_nodes())

    def get_node(self, name: str) -> cpb.NodeSummary:
        return self._run(self.aio.get_node(name))

    def list_pods(self, namespace: str = "", *, queue: str = "", phase: str = "") -> list[spb.PodRow]:
        return self._run(self.aio.list_pods(namespace, queue=queue, phase=phase))

    def get_pod(self, name: str, namespace: str = "default") -> spb.PodRow:
        return self._run(self.aio.get_pod(name, namespace))

    def list_queues(self) -> list[spb.QueueStatus]:
        return self._run(self.aio.list_queues())

    def get_queue(self, name: str) -> spb.QueueStatus:
        return self._run(self.aio.get_queue(name))

    def list_pod_groups(self, namespace: str = "") -> list[spb.PodGroupRow]:
        return self._run(self.aio.list_pod_groups(namespace))

    def get_pod_group(self, name: str, namespace: str = "default") -> spb.PodGroupRow:
        return self._run(self.aio.get_pod_group(name, namespace))

    def list_profiles(self) -> list[spb.ProfileStatus]:
        return self._run(self.aio.list_profiles())

    def get_profile(self, name: str) -> spb.ProfileStatus:
        return self._run(self.aio.get_profile(name))

    def why(self, name: str, namespace: str = "default") -> spb.WhyResponse:
        return self._run(self.aio.why(name, namespace))

    def whatif(self, pod: PodLike, replicas: int = 0, *, profile: str = "") -> spb.WhatIfResponse:
        return self._run(self.aio.whatif(pod, replicas, profile=profile))

    def explain(self, pod: PodLike, *, profile: str = "", nodes: Iterable[str] = ()) -> spb.ExplainResponse:
        return self._run(self.aio.explain(pod, profile=profile, nodes=nodes))

    def health(self, service: str = "") -> str:
        return self._run(self.aio.health(service))

    # ------------------------------------------------------------ changes

    def submit(
        self, items: Iterable[PodLike | GroupLike], *, idempotency_keys: Mapping[str, str] | None = None
    ) -> list[spb.SubmitResult]:
        if idempotency_keys is None:
            return self._run(self.aio.submit(items))
        return self._run(self.aio.submit(items, idempotency_keys=idempotency_keys))

    def submit_gang(
        self,
        group: GroupLike | str,
        pods: Iterable[PodLike],
        *,
        min_member: int | None = None,
        namespace: str = "default",
    ) -> list[spb.SubmitResult]:
        return self._run(self.aio.submit_gang(group, pods, min_member=min_member, namespace=namespace))

    def cancel(self, name: str, namespace: str = "default") -> spb.CancelResponse:
        return self._run(self.aio.cancel(name, namespace))

    def feed(self, items: Iterable[Mapping[str, Any]], *, resync: bool = False) -> dict[str, int]:
        return self._run(self.aio.feed(items, resync=resync))

    @property
    def epoch(self) -> str:
        """The server's epoch as last answered (:attr:`AsyncClient.epoch`)."""
        return self.aio.epoch

    def delete(self, kind: str, names: Iterable[str]) -> int:
        return self._run(self.aio.delete(kind, names))

    # ------------------------------------------------------------ streams

    def wait(self, results: Iterable[spb.SubmitResult], *, timeout: float | None = None) -> outcomes.Waited:
        return self._run(self.aio.wait(results, timeout=timeout))

    def watch_batches(self, pods: Iterable[str] = (), *, replay: bool = False) -> Iterator[list[spb.Decision]]:
        stream = self.aio.watch_batches(pods, replay=replay)
        try:
            while True:
                try:
                    batch = self._run(_next(stream))
                except StopAsyncIteration:
                    return
                yield batch
        finally:
            if not self._loop.is_closed():
                self._run(stream.aclose())

    def watch(self, pods: Iterable[str] = (), *, replay: bool = False) -> Iterator[spb.Decision]:
        for batch in self.watch_batches(pods, replay=replay):
            yield from batch
