"""SSE parsing: lines stamped before JSON parsing, content detection, usage, errors."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from locustfiles.openai_stream import (
    MESSAGE_CHARS,
    StreamResult,
    error_body_message,
    http_error_class,
    read_stream,
    request_body,
    safe_message,
)
from profiles.workload import RequestSpec


def _lines(events: list[object]) -> list[bytes]:
    out: list[bytes] = []
    for e in events:
        out.append(e if isinstance(e, bytes) else b"data: " + json.dumps(e).encode() + b"\n")
        out.append(b"\n")
    return out


def _reader(lines: list[bytes]) -> tuple[Callable[[], bytes], Callable[[], float]]:
    it = iter(lines)
    t = [0.0]

    def readline() -> bytes:
        t[0] += 1.0  # each line "arrives" one second after the previous read
        return next(it, b"")

    return readline, lambda: t[0]


def _delta(text: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def test_role_chunk_is_not_content_and_usage_is_read() -> None:
    lines = _lines(
        [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
            _delta("a"),
            _delta("b"),
            _delta("c"),
            {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 5}},
            b"data: [DONE]\n",
        ]
    )
    readline, clock = _reader(lines)
    res = read_stream(readline, clock, "chat")
    assert res.error_class is None and res.saw_done
    assert res.content_chunks == 3
    assert res.first_token_t == 3.0  # role line at t=1, blank at t=2, first content at t=3
    assert res.gaps_s == [2.0, 2.0]
    assert res.completion_tokens == 5 and res.prompt_tokens == 7


def test_completions_text_chunks() -> None:
    lines = _lines(
        [{"choices": [{"text": "x"}]}, {"choices": [{"text": ""}]}, {"choices": [{"text": "y"}]}]
    )
    readline, clock = _reader(lines)
    res = read_stream(readline, clock, "completions")
    assert res.content_chunks == 2 and res.completion_tokens is None


def test_error_event_inside_stream_is_a_failure() -> None:
    lines = _lines([_delta("a"), {"error": {"message": "overloaded"}}])
    readline, clock = _reader(lines)
    res = read_stream(readline, clock, "chat")
    assert res.error_class == "stream_error" and "overloaded" in res.error_message


def test_no_content_is_empty_and_garbage_is_bad_chunk() -> None:
    readline, clock = _reader(_lines([b"data: [DONE]\n"]))
    assert read_stream(readline, clock, "chat").error_class == "empty"
    readline, clock = _reader([b"data: {not json\n"])
    assert read_stream(readline, clock, "chat").error_class == "bad_chunk"


def test_request_body_asks_for_usage_and_exact_lengths() -> None:
    spec = RequestSpec(0, 3, 9, (("system", "kaka"), ("user", "lolo mimi")))
    body = request_body(spec, "chat", "m", ignore_eos=True)
    assert body["stream"] and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 9 and body["min_tokens"] == 9 and body["ignore_eos"] is True
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    plain = request_body(spec, "completions", "m", ignore_eos=False)
    assert plain["prompt"] == "kaka lolo mimi"
    assert "ignore_eos" not in plain and "min_tokens" not in plain


def test_an_interrupted_read_keeps_its_first_token_time() -> None:
    lines = iter([b'data: {"choices":[{"delta":{"content":"hi"}}]}\n'])
    now = iter([1.0, 2.0])

    def readline() -> bytes:
        try:
            return next(lines)
        except StopIteration:
            raise ConnectionResetError("cut") from None

    partial = StreamResult()
    with pytest.raises(ConnectionResetError):
        read_stream(readline, lambda: next(now), "chat", partial)
    assert partial.first_token_t == 1.0
    assert partial.content_chunks == 1


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (429, "refused"),
        (503, "refused"),
        (400, "client_error"),
        (404, "client_error"),
        (500, "server_error"),
        (502, "server_error"),
        (300, "http_300"),
    ],
)
def test_http_status_classes(status: int, cls: str) -> None:
    assert http_error_class(status) == cls


def test_error_body_message_reads_openai_shape_and_falls_back_to_text() -> None:
    openai = {"error": {"message": "Rate limit reached", "type": "rate_limit", "code": 429}}
    assert error_body_message(json.dumps(openai).encode()) == "Rate limit reached"
    assert error_body_message(b'{"error": "overloaded"}') == "overloaded"
    assert error_body_message(b'{"detail": "Not Found"}') == "Not Found"
    assert error_body_message(b"upstream connect error\n") == "upstream connect error"
    assert error_body_message(b"") == ""


def test_safe_message_truncates_and_withholds_quoted_prompts() -> None:
    prompt = "the quick brown fox jumps over the lazy dog near the river bank " * 3
    body = json.dumps({"messages": [{"role": "user", "content": prompt}]}).encode()
    assert safe_message("x" * 500, body) == "x" * MESSAGE_CHARS
    assert safe_message("too   many\nrequests", body) == "too many requests"
    quoted = f"cannot parse input: {prompt[7:60]!r} (position 12)"
    assert safe_message(quoted, body) == "(message withheld: it quotes the request)"
    # a short overlap (a word or two of the prompt) is not a quote
    assert safe_message("invalid fox", body) == "invalid fox"
