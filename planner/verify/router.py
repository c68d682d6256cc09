"""capplan's own load balancer for `capplan verify --hosts`: a reverse proxy on 127.0.0.1 (or,
when the load comes from workers on other hosts, on the address they reach the master at).

With a list of instances and no load balancer of the user's, capplan routes as the plan
assumed: each request goes to the instance the fleet simulator's own router chooses
(planner.fleet.routing's registry: round-robin, least-outstanding, power-of-two; one
implementation for the plan and the proxy), and its answer,
streamed or not, is passed back chunk by chunk as it comes. One proxy in front of the load
generator sees every request in one place, so least-outstanding counts are exact even when
Locust runs several processes, and requests per instance are counted here, not guessed from
metrics. An instance that cannot be reached answers 502, one that does not answer within
the timeout 504, as a load balancer would.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import aiohttp
from aiohttp import web

from contracts.errors import ConfigError
from planner.engine.requests import EngineRequest
from planner.fleet.routing import Routing, load_only_routings, make_router

# The proxy sees bytes, not token ids: its routers choose by load alone, and this stands in
# for the request they never read.
_UNREAD = EngineRequest(request_id="", prompt_tokens=1, max_tokens=1, arrival_s=0.0)
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}
)


class Router:
    """The proxy's choice and counts: pure bookkeeping, no I/O."""

    def __init__(self, hosts: Sequence[str], kind: Routing) -> None:
        if kind not in load_only_routings():
            raise ConfigError(
                f"--routing {kind!r} with --hosts: capplan's proxy routes by load alone, one of "
                f"{', '.join(load_only_routings())} (a router that reads prompts or sessions "
                "needs --host, your own balancer)"
            )
        self.hosts = [h.rstrip("/") for h in hosts]
        self.kind = kind
        self.outstanding = [0] * len(self.hosts)
        self.routed = [0] * len(self.hosts)
        self._policy = make_router(kind, len(self.hosts))

    def choose(self) -> int:
        k = self._policy.route(_UNREAD, self.outstanding)
        self.outstanding[k] += 1
        self.routed[k] += 1
        return k

    def done(self, k: int) -> None:
        self.outstanding[k] -= 1

    def counts(self) -> dict[str, int]:
        return dict(zip(self.hosts, self.routed, strict=True))


class RouterProxy:
    """The proxy served from its own thread and event loop on `bind_host` (any free port);
    `start()` returns its URL."""

    def __init__(self, router: Router, *, timeout_s: float, bind_host: str = "127.0.0.1") -> None:
        self.router = router
        self.timeout_s = timeout_s
        self.bind_host = bind_host
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        path = request.rel_url.path_qs
        if path.startswith("/v1/models") or request.method == "GET":
            k = 0  # a listing, not load: the first instance answers it, uncounted
            counted = False
        else:
            k = self.router.choose()
            counted = True
        url = self.router.hosts[k] + path
        headers = {h: v for h, v in request.headers.items() if h.lower() not in _HOP_HEADERS}
        body = await request.read()
        response: web.StreamResponse | None = None
        try:
            async with self._session.request(
                request.method, url, data=body, headers=headers
            ) as upstream:
                response = web.StreamResponse(status=upstream.status)
                for h, v in upstream.headers.items():
                    if h.lower() not in _HOP_HEADERS:
                        response.headers[h] = v
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
        except TimeoutError:
            if response is not None and response.prepared:
                return response  # cut mid-stream: the client sees the stream end early
            return web.Response(status=504, text=f"capplan router: {url} did not answer")
        except (aiohttp.ClientError, OSError) as err:
            if response is not None and response.prepared:
                return response
            return web.Response(status=502, text=f"capplan router: {url}: {err}")
        finally:
            if counted:
                self.router.done(k)

    async def _start(self) -> str:
        timeout = aiohttp.ClientTimeout(total=None, sock_read=self.timeout_s)
        connector = aiohttp.TCPConnector(limit=0)
        self._session = aiohttp.ClientSession(timeout=timeout, connector=connector)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.bind_host, 0)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        host = f"[{self.bind_host}]" if ":" in self.bind_host else self.bind_host
        return f"http://{host}:{port}"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def start(self) -> str:
        self._thread.start()
        return asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
