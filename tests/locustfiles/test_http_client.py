"""The load generator's HTTP client: the bytes it sends are the library's own, answers read."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import gevent
import pytest
from gevent.server import StreamServer
from geventhttpclient.client import HTTPClient
from geventhttpclient.url import URL

from locustfiles.http_client import StreamClient, line_reader

ANSWER = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
HEADERS = {"Content-Type": "application/json", "Accept-Encoding": "identity"}


class _Capture:
    """A keep-alive HTTP server (gevent) that keeps every request's bytes and connection and
    answers with `answer`: byte pieces written one by one, a little apart (so that they
    arrive in separate reads)."""

    def __init__(self, answer: list[bytes] | None = None) -> None:
        self.answer = answer
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
            if self.answer is not None:
                for piece in self.answer:
                    sock.sendall(piece)
                    gevent.sleep(0.002)  # pacing the pieces, not waiting for anything
                continue
            sock.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Content-Length: " + str(len(ANSWER)).encode() + b"\r\n\r\n" + ANSWER
            )


@contextmanager
def _server(answer: list[bytes] | None = None) -> Iterator[_Capture]:
    capture = _Capture(answer)
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


_SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
_EVENTS = b'data: {"a":1}\n\ndata: {"b":2}\r\n\r\n: comment\nevent: x\ndata: [DONE]\n\nend'


def _chunked(pieces: list[bytes]) -> list[bytes]:
    return [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces] + [b"0\r\n\r\n"]


@pytest.mark.parametrize(
    "answer",
    [
        # Content-Length body in pieces that split lines, a CRLF pair and "[DONE]"
        [_SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(_EVENTS) + _EVENTS[:9]]
        + [_EVENTS[i : i + 7] for i in range(9, len(_EVENTS), 7)],
        # chunked transfer encoding, chunks split mid-line, the head apart from the body
        [_SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"]
        + _chunked([_EVENTS[:5], _EVENTS[5:30], _EVENTS[30:31], _EVENTS[31:]]),
        # everything in one write
        [_SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(_EVENTS) + _EVENTS],
    ],
)
def test_line_reader_reads_the_lines_readline_reads(answer: list[bytes]) -> None:
    with _server(answer) as capture:
        client = StreamClient(
            f"http://127.0.0.1:{capture.server.server_port}",
            connection_timeout_s=5,
            network_timeout_s=5,
        )
        try:
            raw = client.post("/v1/completions", b"{}", HEADERS)
            readline = line_reader(raw)
            ours = list(iter(readline, b""))
            assert readline() == b""
            raw.release()
            raw = client.post("/v1/completions", b"{}", HEADERS)
            theirs = list(iter(lambda: raw.readline(b"\n"), b""))
            raw.release()
        finally:
            client.close()
    assert ours == theirs
    assert ours[0] == b'data: {"a":1}\n' and ours[2] == b'data: {"b":2}\r\n'
    assert ours[-2:] == [b"data: [DONE]\n", b"\n"]  # "end" is unterminated: dropped
    assert capture.connections == 1  # both answers read to their end: the connection was reused


def test_an_ip_literal_host_is_not_looked_up_per_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _server() as capture:
        base = f"http://127.0.0.1:{capture.server.server_port}"
        client = StreamClient(base, connection_timeout_s=5, network_timeout_s=5)

        def no_lookup(*args: object, **kwargs: object) -> None:
            raise AssertionError(f"looked up {args}")

        monkeypatch.setattr(gevent.socket, "getaddrinfo", no_lookup)

        def one() -> bytes:
            raw = client.post("/v1/completions", b"{}", HEADERS)
            body = b"".join(iter(line_reader(raw), b""))
            raw.release()
            return body

        try:
            done = gevent.joinall([gevent.spawn(one) for _ in range(5)], raise_error=True)
        finally:
            client.close()
    assert [g.value for g in done] == [ANSWER] * 5
    assert capture.connections >= 2  # concurrent requests opened new connections
