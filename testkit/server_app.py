"""The app skeleton the test servers share: OpenAI routes, JSON logs and a Prometheus page.

testkit.stream_server and testkit.slot_server differ in how they answer a request and
which figures they keep; the routes and the /metrics text format are the same, and live here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from aiohttp import web

Generate = Callable[[web.Request, str], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Sample:
    """One Prometheus series: its name, help line, type, value and optional `{labels}`."""

    name: str
    help: str
    kind: Literal["gauge", "counter"]
    value: float
    labels: str = ""


def exposition(samples: Iterable[Sample]) -> str:
    """The Prometheus text format of `samples` (HELP and TYPE lines, then the value)."""
    return "".join(
        f"# HELP {s.name} {s.help}\n# TYPE {s.name} {s.kind}\n{s.name}{s.labels} {s.value}\n"
        for s in samples
    )


def server_app(
    generate: Generate,
    metrics: Callable[[], Iterable[Sample]],
    logs: dict[str, Callable[[], object]],
) -> web.Application:
    """An app answering POST /v1/chat/completions and /v1/completions with `generate(request,
    "chat" | "completions")`, GET /metrics with `metrics()` and GET /<name> with the JSON of
    each `logs` entry."""

    async def chat(request: web.Request) -> web.StreamResponse:
        return await generate(request, "chat")

    async def completions(request: web.Request) -> web.StreamResponse:
        return await generate(request, "completions")

    async def metrics_page(request: web.Request) -> web.Response:
        return web.Response(text=exposition(metrics()), content_type="text/plain")

    def log_page(read: Callable[[], object]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def page(request: web.Request) -> web.Response:
            return web.json_response(read())

        return page

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/completions", completions)
    for name, read in logs.items():
        app.router.add_get(f"/{name}", log_page(read))
    app.router.add_get("/metrics", metrics_page)
    return app
