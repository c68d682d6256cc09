"""OpenAI-compatible streaming requests: request bodies, incremental SSE parsing, chunk timing.

`read_stream` consumes server-sent events line by line from any `readline` callable and
stamps each line with the clock *as soon as it is read*, before its JSON is parsed, so TTFT
and inter-token gaps are not inflated by client-side parsing. A chunk counts as content
when it carries non-empty text (`delta.content`, `delta.reasoning_content`, tool calls, or
`text` for completions); the role-only first chunk of chat servers does not.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from profiles.workload import RequestSpec

Endpoint = Literal["chat", "completions"]

PATHS: dict[str, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}

MESSAGE_CHARS = 200  # error messages are truncated to this many characters
_QUOTE_WINDOW = 24  # a message quoting this many characters of the request is withheld

# An HTTP answer's error class by status (README, "Error classes"): the server refused the
# load (429 Too Many Requests, 503 Service Unavailable), rejected the request, or failed.
REFUSED_STATUSES = frozenset({429, 503})


def http_error_class(status: int) -> str:
    """`refused` (429, 503), `client_error` (other 4xx), `server_error` (other 5xx), else
    `http_<status>` (an unexpected non-success status below 400, e.g. an unfollowed 3xx)."""
    if status in REFUSED_STATUSES:
        return "refused"
    if 400 <= status < 500:
        return "client_error"
    if 500 <= status < 600:
        return "server_error"
    return f"http_{status}"


def _error_text(error: Any) -> str:
    """The message of an OpenAI-shaped error value (`{"message": ...}` or a plain string)."""
    if isinstance(error, dict):
        for key in ("message", "detail", "msg"):
            if isinstance(error.get(key), str):
                return str(error[key])
        return json.dumps(error, separators=(",", ":"))
    return str(error)


def error_body_message(body: bytes) -> str:
    """The message of an HTTP error body: OpenAI's `error.message`, a top-level `message` or
    `detail`, or else the body text itself (not yet truncated or checked, see safe_message)."""
    try:
        obj = orjson.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip()
    if isinstance(obj, dict):
        if obj.get("error") is not None:
            return _error_text(obj["error"])
        return _error_text(obj)
    return body.decode("utf-8", "replace").strip()


def safe_message(message: str, request_body: bytes) -> str:
    """`message` truncated to MESSAGE_CHARS, or withheld when it quotes the request body.

    Prompt text is never recorded, and some servers echo the input in their errors: any
    window of `_QUOTE_WINDOW` characters (at half-window steps, so a quote of 1.5 windows is
    always caught) found in the JSON-encoded request withholds the whole message.
    """
    text = " ".join(message.split())[:MESSAGE_CHARS]
    step = _QUOTE_WINDOW // 2
    for start in range(0, max(len(text) - _QUOTE_WINDOW, 0) + 1, step):
        window = text[start : start + _QUOTE_WINDOW]
        if len(window) < _QUOTE_WINDOW:
            break
        if orjson.dumps(window)[1:-1] in request_body:
            return "(message withheld: it quotes the request)"
    return text


def request_body(
    spec: RequestSpec, endpoint: Endpoint, model: str, *, ignore_eos: bool
) -> dict[str, Any]:
    """The JSON body for `spec`: streamed, usage requested, `max_tokens` = sampled output.

    With `ignore_eos`, also `ignore_eos` and `min_tokens` so vLLM-compatible servers produce
    exactly the sampled number of tokens (servers that reject them need `ignore_eos=False`).
    """
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": spec.output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if endpoint == "chat":
        body["messages"] = [{"role": role, "content": text} for role, text in spec.messages]
    else:
        body["prompt"] = spec.prompt()
    if ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = spec.output_tokens
    return body


@dataclass
class StreamResult:
    """What one streamed response showed; times come from the injected clock."""

    first_token_t: float | None = None
    last_token_t: float | None = None
    end_t: float | None = None
    content_chunks: int = 0
    gaps_s: list[float] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error_class: str | None = None
    error_message: str = ""
    saw_done: bool = False


def _has_content(obj: dict[str, Any], endpoint: Endpoint) -> bool:
    choices = obj.get("choices")
    if not choices:
        return False
    choice = choices[0]
    if (endpoint == "completions" or "text" in choice) and choice.get("text"):
        return True
    delta = choice.get("delta")
    if not delta:
        return False
    return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"))


def read_stream(
    readline: Callable[[], bytes],
    clock: Callable[[], float],
    endpoint: Endpoint,
    into: StreamResult | None = None,
) -> StreamResult:
    """Parse an SSE body until `[DONE]` or end of stream; errors end up in `error_class`.

    `readline` returns one line (with its newline) or b"" at the end; network exceptions
    propagate to the caller, which classifies them (disconnect, timeout, cancelled). The
    result is filled in place in `into` when given, so a caller whose read is interrupted
    still knows when the first token came.
    """
    res = into if into is not None else StreamResult()
    while True:
        line = readline()
        if not line.startswith(b"data:"):
            if not line:
                break
            continue  # blank separators, comments, `event:` lines
        t = clock()  # before the JSON is parsed (a blank line needs no time: half the lines)
        payload = line[5:].strip()
        if payload == b"[DONE]":
            res.saw_done = True
            break
        try:
            obj = orjson.loads(payload)  # 5x faster than json.loads on a chunk, same values
        except ValueError:
            res.error_class = "bad_chunk"
            res.error_message = payload[:MESSAGE_CHARS].decode("utf-8", "replace")
            break
        if not isinstance(obj, dict):
            continue
        if obj.get("error") is not None:
            res.error_class = "stream_error"
            res.error_message = _error_text(obj["error"])
            break
        if _has_content(obj, endpoint):
            if res.first_token_t is None:
                res.first_token_t = t
            else:
                assert res.last_token_t is not None
                res.gaps_s.append(t - res.last_token_t)
            res.last_token_t = t
            res.content_chunks += 1
        usage = obj.get("usage")
        if isinstance(usage, dict):
            if usage.get("completion_tokens") is not None:
                res.completion_tokens = int(usage["completion_tokens"])
            if usage.get("prompt_tokens") is not None:
                res.prompt_tokens = int(usage["prompt_tokens"])
    res.end_t = clock()
    if res.error_class is None and res.content_chunks == 0:
        res.error_class = "empty"
    return res
