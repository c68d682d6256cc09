"""The load generator's HTTP client: the bytes it sends are the library's own, answers read."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import gevent
import pytest
from gevent.server import StreamServer
from geventhttpclient.client import HTTPClient
from geventhttpclient.url import URL

from locustfiles.http_client import StreamClient

ANSWER = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
HEADERS = {"Content-Type": "application/json", "Accept-Encoding": "identity"}


class _Capture:
    """A keep-alive HTTP server (gevent) that keeps every request's bytes and connection."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.connections = 0
        self.server = StreamServer(("127.0.0.1", 0), self._handle)

    def _handle(self, sock: gevent.socket.socket, _address: object) -> None:
        self.connections += 1
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            head, _, rest = buf.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(rest) < length:
                rest += sock.recv(65536)
            self.requests.append(head + b"\r\n\r\n" + rest[:length])
            buf = rest[length:]
            sock.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Content-Length: " + str(len(ANSWER)).encode() + b"\r\n\r\n" + ANSWER
            )


@contextmanager
def _server() -> Iterator[_Capture]:
    capture = _Capture()
    capture.server.start()
    try:
        yield capture
    finally:
        capture.server.stop()


@pytest.mark.parametrize("prefix", ["", "/api/v2"])
def test_sends_the_bytes_the_library_sends_and_reads_the_answer(prefix: str) -> None:
    with _server() as capture:
        base = f"http://127.0.0.1:{capture.server.server_port}{prefix}"
        client = StreamClient(base, connection_timeout_s=5, network_timeout_s=5)
        library = HTTPClient.from_url(URL(base), concurrency=10)
        bodies = [b'{"a":1}', b'{"prompt":"' + b"kaka " * 300 + b'"}', b'{"a":2}']
        try:
            for body in bodies:
                raw = client.post("/v1/chat/completions", body, HEADERS)
                lines = []
                while line := raw.readline(b"\n"):
                    lines.append(line)
                raw.release()
                assert raw.status_code == 200 and b"".join(lines) == ANSWER
                library.request("POST", prefix + "/v1/chat/completions", body, HEADERS).read()
        finally:
            client.close()
            library.close()
    ours, theirs = capture.requests[0::2], capture.requests[1::2]
    assert ours == theirs  # request line, Host, User-Agent, Content-Length: byte for byte
    assert [r.endswith(b) for r, b in zip(ours, bodies, strict=True)] == [True] * 3
    assert capture.connections == 2  # one kept-alive connection each


def test_refused_connection_raises_the_socket_error() -> None:
    with _server() as capture:
        port = capture.server.server_port
    client = StreamClient(f"http://127.0.0.1:{port}", connection_timeout_s=5, network_timeout_s=5)
    with pytest.raises(ConnectionRefusedError):
        client.post("/v1/completions", b"{}", HEADERS)
    client.close()
