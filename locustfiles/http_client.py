"""The load generator's HTTP client: pooled keep-alive POSTs on geventhttpclient, for Locust.

Locust's FastHttpSession wraps every request in a user agent (request objects, header merging,
cookies, retry and redirect handling, a response copy per context manager). A py-spy profile of
one load process at 400 req/s against a zero-delay server put a fifth of its busy time there,
and a streamed POST needs none of it. This client sends on `geventhttpclient.HTTPClient`
directly (the library under FastHttpSession) and still reports every request to Locust's
statistics (web UI, --csv) through `environment.events.request`.

The request head is built once per body length by the library's own `_build_request` (the
same bytes, Host, User-Agent and Content-Length included) and reused, where building and
checking it anew (headers merged twice, each field matched by a regex) ran every request. The
send itself follows `HTTPClient.request` for a POST with a bytes body (one attempt: a POST is never
retried, as in the library; on a reset during the send, an answer the server sent first is
still read). `line_reader` reads an answer's lines as `readline(b"\n")` does, but splits all
the bytes that have arrived at once (18 SSE events are 36 lines, a readline each). Together
they halve the CPU of a streamed request (bench/loadgen_parts.py). These use the library's
private names, checked by tests/locustfiles/test_http_client.py against the library's own
requests and readline.
"""

from __future__ import annotations

import errno
import ipaddress
from collections.abc import Callable, Mapping
from typing import Any

from geventhttpclient.client import HTTPClient
from geventhttpclient.connectionpool import ConnectionPool
from geventhttpclient.response import HTTPConnectionClosed, HTTPSocketPoolResponse
from geventhttpclient.url import URL

POOL_SIZE = 100_000  # connections kept per host: never a hidden client-side cap on concurrency
HEAD_CACHE_SIZE = 4096  # request heads kept (one per body length and header set)


class StreamClient:
    """POSTs to one base URL (scheme, host, port and an optional path prefix).

    `post` returns the response once its status line and headers have arrived; the caller reads
    the body (`readline`, `read`) and must `release()` it. Connection failures raise the
    socket's own exceptions (ConnectionRefusedError, socket.timeout, ...). `on_request`
    receives Locust's request-event keywords for each reported request.
    """

    def __init__(
        self,
        base_url: str,
        *,
        connection_timeout_s: float,
        network_timeout_s: float,
        on_request: Callable[..., None] | None = None,
    ) -> None:
        url = URL(base_url)
        self._prefix = url.path.rstrip("/")
        self._client = HTTPClient.from_url(
            url,
            concurrency=POOL_SIZE,
            connection_timeout=connection_timeout_s,
            network_timeout=network_timeout_s,
        )
        self._on_request = on_request
        _resolve_once_if_literal(self._client._connection_pool)
        self._heads: dict[tuple[str, int, tuple[tuple[str, str], ...]], bytes] = {}

    def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> HTTPSocketPoolResponse:
        request = self._head(path, body, headers) + body
        client = self._client
        pool = client._connection_pool
        sock = pool.get_socket()
        try:
            sock.sendall(request)
        except OSError as err:
            if err.errno not in (errno.ECONNRESET, errno.EPIPE):
                pool.release_socket(sock)
                raise
            # The server may have answered (an early error) before it closed: read that.
        return HTTPSocketPoolResponse(
            sock,
            pool,
            block_size=client.block_size,
            method="POST",
            headers_type=client.headers_type,
        )

    def _head(self, path: str, body: bytes, headers: Mapping[str, str]) -> bytes:
        """The request line and headers of a POST of `body`, as the library builds them (cached
        by path, body length and headers)."""
        key = (path, len(body), tuple(headers.items()))
        head = self._heads.get(key)
        if head is None:
            if len(self._heads) >= HEAD_CACHE_SIZE:
                self._heads.clear()
            text = self._client._build_request("POST", self._prefix + path, body, headers)
            head = self._heads[key] = text.encode("latin-1")
        return head

    def report(
        self, name: str, path: str, response_time_s: float, length: int, error: str | None
    ) -> None:
        """One request into Locust's statistics (`error` None: a success)."""
        if self._on_request is None:
            return
        self._on_request(
            request_type="POST",
            name=name,
            response_time=response_time_s * 1000.0,
            response_length=length,
            response=None,
            context={},
            exception=RequestFailed(error) if error is not None else None,
            url=self._prefix + path,
        )

    def close(self) -> None:
        self._client.close()


def _resolve_once_if_literal(pool: ConnectionPool) -> None:
    """An IP-literal host needs no lookup: resolve it once, not per new connection (through
    gevent's resolver thread pool: a burst of new connections waited on it)."""
    try:
        ipaddress.ip_address(pool._connection_host)
    except ValueError:
        return  # a name: looked up per new connection, as its addresses may change
    addresses = pool._resolve()
    pool._resolve = lambda: addresses  # type: ignore[method-assign]


def line_reader(response: HTTPSocketPoolResponse) -> Callable[[], bytes]:
    """A `readline()` over `response`'s body: the next line with its b"\n", or b"" once the
    answer is complete (an unterminated last line is dropped, as `response.readline` does).

    Each call that finds no complete line left splits everything the socket has delivered so
    far; it reads the socket only when that holds no complete line. Socket errors release the
    response and propagate.
    """
    ready: list[bytes] = []  # complete lines, last one first
    tail = b""  # the start of a line whose end has not arrived

    def readline() -> bytes:
        nonlocal tail
        if ready:
            return ready.pop()
        while True:
            buffer = response._body_buffer
            if buffer:
                lines = (tail + buffer).split(b"\n")
                del buffer[:]
                tail = lines.pop()
                if lines:
                    ready.extend(line + b"\n" for line in reversed(lines))
                    return ready.pop()
            if response.message_complete:
                return b""
            sock = response._sock
            if sock is None:
                raise HTTPConnectionClosed("connection closed.")
            try:
                response.feed(sock.recv(response.block_size))
            except BaseException:
                response.release()
                raise

    return readline


class RequestFailed(Exception):
    """The failure of one request as Locust's statistics show it: `class: message`."""


def request_event(environment: Any) -> Callable[..., None]:
    """The `fire` of a Locust environment's request event."""
    return environment.events.request.fire  # type: ignore[no-any-return]
