"""SSE parsing: lines stamped before JSON parsing, content detection, usage, errors."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from locustfiles.openai_stream import StreamResult, read_stream, request_body
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
