"""A list-then-watch informer over kubernetes-asyncio's transport.

client-go's reflector, reduced to what Berth needs:

1. LIST (paged) and remember the list's resourceVersion;
2. WATCH from it with bookmarks (``allowWatchBookmarks``), remembering the
   resourceVersion of every event and bookmark;
3. when the stream ends or breaks, WATCH again from the last version, with
   backoff; on ``410 Gone`` (the version was compacted away), LIST afresh and
   diff the result against the store, so handlers see exactly the adds,
   updates and deletes they missed — no event lost, none applied twice.

kubernetes-asyncio supplies authentication, TLS and the request; we read
the raw responses (``_preload_content=False``) and decode each object with
msgspec into Berth's own model, because its generated model classes are
slow to build and Berth needs only the scheduling fields (this is the part
no library does for us).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import aiohttp
import msgspec
from kubernetes_asyncio.client.exceptions import ApiException

from berth.adapters.kubernetes.backoff import Backoff, describe
from berth.cluster import model

__all__ = ["Handlers", "Informer", "WatchEvent"]

log = logging.getLogger(__name__)

T = TypeVar("T")


#: A LIST page that takes longer than this is retried (client-go bounds
#: requests by its client timeout; kubernetes-asyncio sets none).
LIST_TIMEOUT_SECONDS = 60.0
#: How long past the watch's own ``timeoutSeconds`` its stream may stay open.
WATCH_GRACE_SECONDS = 30
#: A watch that has sent nothing for this long is dead, not quiet: the API
#: server's watch cache sends a bookmark "roughly every minute" to a watch
#: that asked for them (``defaultBookmarkFrequency``, k8s.io/apiserver
#: pkg/storage/cacher/cacher.go and cache_watcher.go ``nextBookmarkTime``,
#: v0.37.2), so a connection silent past a minute and a half has lost its
#: peer without a FIN or RST (a NAT or load balancer dropping state). It is
#: closed — never handed back to the pool — and the watch resumes on a fresh
#: one; without this, the stream would wait for its total timeout (300 + 30
#: s) while nothing is scheduled from stale state.
WATCH_READ_IDLE_SECONDS = 90.0


class _Meta(msgspec.Struct):
    resourceVersion: str = ""
    # The list's metadata.continue token (paging).
    continue_: str | None = msgspec.field(default=None, name="continue")


class _ListHead(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    items: list[msgspec.Raw] = []


class WatchEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _Status(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""


class _ObjMeta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""


class _Obj(msgspec.Struct):
    metadata: _ObjMeta = msgspec.field(default_factory=_ObjMeta)


class Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410 / Status code 410)."""


class Handlers(Generic[T]):
    """What an informer calls; each may be a plain function."""

    def __init__(
        self,
        on_add: Callable[[T], None],
        on_update: Callable[[T, T], None],
        on_delete: Callable[[T], None],
    ) -> None:
        self.on_add = on_add
        self.on_update = on_update
        self.on_delete = on_delete

    @classmethod
    def mirror(cls, put: Callable[[T], None], remove: Callable[[T], None]) -> Handlers[T]:
        """An add or an update stores the newest object; a delete removes it."""
        return cls(on_add=put, on_update=lambda _old, new: put(new), on_delete=remove)


ListCall = Callable[..., Awaitable[Any]]


async def checked(resp: Any) -> Any:
    """Raise for a non-2xx raw response (``_preload_content=False`` skips that check)."""
    if 200 <= resp.status <= 299:
        return resp
    try:
        body = await resp.read()
    finally:
        resp.release()
    if resp.status == 410:
        raise Gone(body.decode(errors="replace"))
    raise ApiException(status=resp.status, reason=body.decode(errors="replace")[:500])


class Informer(Generic[T]):
    """Keeps ``store`` equal to the API server's view of one resource."""

    def __init__(
        self,
        name: str,
        list_call: ListCall,
        decode: type[T],
        handlers: Handlers[T],
        *,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        read_idle: float = WATCH_READ_IDLE_SECONDS,
        prepare: Callable[[T], T] | None = None,
    ) -> None:
        """``prepare``: applied to every object just decoded, before the
        store and the handlers see it (the pod informer's is
        :func:`berth.cluster.model.share_containers`: nothing downstream
        changes a pod in place, so equal and empty containers are shared)."""
        self.name = name
        self._list_call = list_call
        self._decoder = msgspec.json.Decoder(decode)
        self._prepare = prepare
        self._handlers = handlers
        self._field_selector = field_selector
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self._read_idle = read_idle
        self.store: dict[str, tuple[str, T]] = {}  # key -> (resourceVersion, object)
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.relists = 0
        self.events = 0
        self.silent_watches = 0
        #: Times :meth:`reconnect` replaced the connection in use.
        self.reconnects = 0
        #: The LIST or WATCH in flight (cancelled by :meth:`reconnect`).
        self._step: asyncio.Task[None] | None = None

    @staticmethod
    def _key(meta: _ObjMeta) -> str:
        # NAMESPACE/NAME interned (model.pod_key): the very string the core
        # keys a pod by, not one more copy of it per object.
        return model.pod_key(meta.namespace, meta.name) if meta.namespace else meta.name

    def _decode(self, raw: msgspec.Raw) -> T:
        obj = self._decoder.decode(raw)
        return obj if self._prepare is None else self._prepare(obj)

    def _kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"_preload_content": False}
        if self._field_selector:
            kw["field_selector"] = self._field_selector
        return kw

    # ------------------------------------------------------------ list

    async def _list(self) -> None:
        """LIST all pages, then reconcile the store with what came back."""
        fresh: dict[str, tuple[str, msgspec.Raw, _ObjMeta]] = {}
        token: str | None = None
        rv = ""
        while True:
            kw = self._kwargs()
            kw["limit"] = self._page_size
            kw["_request_timeout"] = LIST_TIMEOUT_SECONDS
            if token:
                kw["_continue"] = token
            resp = await checked(await self._list_call(**kw))
            try:
                body = await resp.read()
            finally:
                resp.release()
            head = msgspec.json.decode(body, type=_ListHead)
            for raw in head.items:
                meta = msgspec.json.decode(raw, type=_Obj).metadata
                fresh[self._key(meta)] = (meta.resourceVersion, raw, meta)
            rv = head.metadata.resourceVersion
            token = head.metadata.continue_
            if not token:
                break
        self.relists += 1
        # Reconcile: deletes first (frees resources), then adds and updates.
        for key in [k for k in self.store if k not in fresh]:
            _, old = self.store.pop(key)
            self._handlers.on_delete(old)
        for key, (obj_rv, raw, _) in fresh.items():
            have = self.store.get(key)
            if have is not None and have[0] == obj_rv:
                continue  # unchanged: do not apply twice
            obj = self._decode(raw)
            self.store[key] = (obj_rv, obj)
            if have is None:
                self._handlers.on_add(obj)
            else:
                self._handlers.on_update(have[1], obj)
        self.resource_version = rv

    # ------------------------------------------------------------ watch

    async def _watch(self) -> None:
        kw = self._kwargs()
        kw.update(
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=self.resource_version,
            timeout_seconds=self._watch_timeout,
            # The server ends the watch after timeout_seconds; a stream still
            # open well past that is a dead connection (no RST), not a quiet one.
            _request_timeout=self._watch_timeout + WATCH_GRACE_SECONDS,
        )
        resp = await checked(await self._list_call(**kw))
        chunks = aiter(resp.content.iter_any())
        ended = False
        try:
            buf = b""
            while True:
                try:
                    async with asyncio.timeout(self._read_idle):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    _drop(resp)
                    raise SilentWatch(f"the watch sent nothing for {self._read_idle:.0f}s") from None
                buf += chunk
                while True:
                    nl = buf.find(b"\n")
                    if nl < 0:
                        break
                    line, buf = buf[:nl], buf[nl + 1 :]
                    if line.strip():
                        self._apply(msgspec.json.decode(line, type=WatchEvent))
            ended = True
        finally:
            if not ended:
                _drop(resp)  # cancelled or failed mid-stream: never back to the pool
            resp.release()

    def _apply(self, ev: WatchEvent) -> None:
        if ev.type == "ERROR":
            st = msgspec.json.decode(ev.object, type=_Status)
            if st.code == 410:
                raise Gone(st.message)
            raise ApiException(status=st.code, reason=f"{st.reason}: {st.message}")
        meta = msgspec.json.decode(ev.object, type=_Obj).metadata
        if ev.type == "BOOKMARK":
            self.resource_version = meta.resourceVersion
            return
        key = self._key(meta)
        self.events += 1
        if ev.type == "DELETED":
            have = self.store.pop(key, None)
            if have is not None:
                self._handlers.on_delete(have[1])
        else:
            have = self.store.get(key)
            if have is not None and have[0] == meta.resourceVersion:
                pass  # already applied (e.g. seen in a relist)
            else:
                obj = self._decode(ev.object)
                self.store[key] = (meta.resourceVersion, obj)
                if have is None:
                    self._handlers.on_add(obj)
                else:
                    self._handlers.on_update(have[1], obj)
        self.resource_version = meta.resourceVersion

    # ------------------------------------------------------------ reconnect

    def reconnect(self) -> bool:
        """Abandon the LIST or WATCH in flight — its connection is closed,
        never pooled — and resume at once on a fresh one from the last
        resourceVersion (nothing is listed again unless that is too old).
        For a caller that learnt the API server stopped answering on the
        existing connections (a Lease renewal that timed out): a watch on a
        half-open connection would otherwise wait for its read-idle limit.
        False when nothing was in flight."""
        step = self._step
        if step is None or step.done():
            return False
        step.cancel()
        return True

    async def _run_step(self, coro: Awaitable[None]) -> bool:
        """Run one LIST or WATCH as its own task; False when :meth:`reconnect`
        cancelled it (the informer itself being cancelled raises)."""
        step = self._step = asyncio.ensure_future(coro)
        try:
            await step
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                raise
            self.reconnects += 1
            log.info("%s informer: reconnecting on a fresh connection", self.name)
            return False
        finally:
            self._step = None
        return True

    # ------------------------------------------------------------ run

    async def run(self) -> None:
        """List, then watch until cancelled; relist on 410; back off on errors.

        Nothing the API server does ends this loop: while it is unreachable
        the informer retries with client-go's reflector backoff (:class:`Backoff`),
        one warning per step, and ``synced`` is set only by a complete LIST.
        """
        backoff = Backoff(clock=asyncio.get_running_loop().time)
        need_list = True
        while True:
            step = "list" if need_list else "watch"
            try:
                if need_list:
                    if not await self._run_step(self._list()):
                        continue
                    need_list = False
                    if not self.synced.is_set():
                        log.info("%s informer: synced (%d objects)", self.name, len(self.store))
                    self.synced.set()
                    step = "watch"
                await self._run_step(self._watch())
                continue  # a clean end of the watch (its timeout) or a reconnect: resume at once
            except asyncio.CancelledError:
                raise
            except Gone as e:
                log.info("%s informer: resourceVersion too old (%s); relisting", self.name, e)
                need_list = True
                continue
            except ApiException as e:
                if e.status == 410:
                    need_list = True
                    continue
                why = f"API error {describe(e)}"
            except SilentWatch as e:
                # Resume at once on a fresh connection (the dead one is closed).
                log.warning("%s informer: %s; watching again on a new connection", self.name, e)
                self.silent_watches += 1
                continue
            except (TimeoutError, aiohttp.ClientError, OSError) as e:
                why = f"cannot reach the API server ({describe(e)})"
            except msgspec.DecodeError as e:
                why = f"undecodable response ({e})"
            except Exception:
                # A bug (a handler raising, say): keep the informer alive and
                # resynchronise the store from a fresh LIST.
                log.exception("%s informer: unexpected error; relisting", self.name)
                need_list = True
                why = "unexpected error"
            delay = backoff.next()
            log.warning("%s informer: %s failed: %s; retrying in %.1fs", self.name, step, why, delay)
            await asyncio.sleep(delay)


class SilentWatch(Exception):
    """A watch stream sent nothing, not even a bookmark, for too long."""


def _drop(resp: Any) -> None:
    """Close ``resp``'s connection instead of returning it to the pool."""
    close = getattr(resp, "close", None)
    if close is not None:
        close()


async def cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    for t in tasks:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t
