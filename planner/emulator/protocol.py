"""The OpenAI-compatible wire format of the emulator: request parsing, response bodies and errors.

Parsing turns a request body into token counts and prompt-block hashes right away; the
prompt text itself is never kept. Streaming chunks are built from pre-encoded byte pieces
because a busy emulator writes tens of thousands of them per second.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from contracts.errors import InputError
from profiles.tokenize import ApproxTokenizer, chained_block_hashes

Kind = Literal["completion", "chat"]

_TOKENIZER = ApproxTokenizer()

# Filler words for generated text: four letters each, so ApproxTokenizer reads one token per word.
_FILLER = [
    "lore",
    "mica",
    "nova",
    "opal",
    "pine",
    "quay",
    "reed",
    "sage",
    "tide",
    "vale",
    "wren",
    "yarn",
    "zinc",
    "arch",
    "beam",
    "cove",
    "dune",
    "echo",
    "fern",
    "glow",
    "haze",
    "iris",
    "jade",
    "kelp",
    "lark",
    "moss",
    "nook",
    "oath",
    "palm",
    "rain",
    "silk",
    "tarn",
]
FILLER_TOKENS: tuple[str, ...] = tuple(" " + w for w in _FILLER)
_FILLER_JSON: tuple[bytes, ...] = tuple(json.dumps(t)[1:-1].encode() for t in FILLER_TOKENS)


class RequestRejected(InputError):
    """A request the emulator answers with an OpenAI-shaped error instead of a completion."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        error_type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """OpenAI's error shape: {"error": {"message", "type", "param", "code"}}."""
        return {
            "error": {
                "message": str(self),
                "type": self.error_type,
                "param": self.param,
                "code": self.code,
            }
        }


@dataclass(frozen=True)
class ParsedRequest:
    """What the emulator keeps of a request body: counts, hashes and options, never text."""

    kind: Kind
    model: str | None
    prompt_tokens: int
    block_hashes: tuple[int, ...]
    max_tokens: int | None
    min_tokens: int
    ignore_eos: bool
    stream: bool
    include_usage: bool


def _int_field(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestRejected(f"`{name}` must be an integer, got {value!r}", param=name)
    return value


def _bool_field(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise RequestRejected(f"`{name}` must be a boolean, got {value!r}", param=name)
    return value


def _message_text(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise RequestRejected("`messages` must be a non-empty list", param="messages")
    parts: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestRejected(
                f"messages[{i}] must be an object with a string `role`", param="messages"
            )
        content = message.get("content")
        if content is None:
            text = ""
        elif isinstance(content, str):
            text = content
        elif isinstance(content, list):
            pieces = []
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "text":
                    raise RequestRejected(
                        f"messages[{i}].content: only text parts are supported", param="messages"
                    )
                pieces.append(str(part.get("text", "")))
            text = "".join(pieces)
        else:
            raise RequestRejected(
                f"messages[{i}].content must be a string or a list of text parts",
                param="messages",
            )
        # A minimal chat template: `role: content` (the role and colon add 2-3 tokens).
        parts.append(f"{message['role']}: {text}\n")
    return "".join(parts)


def _is_token_ids(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value)
    )


def _prompt_ids(prompt: Any) -> list[int]:
    """Token ids of a completions prompt: a string, one-string list, or token ids (as vLLM)."""
    if isinstance(prompt, str):
        return _TOKENIZER.encode(prompt)
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return _TOKENIZER.encode(prompt[0])
    if _is_token_ids(prompt):
        return list(prompt)
    if isinstance(prompt, list) and len(prompt) == 1 and _is_token_ids(prompt[0]):
        return list(prompt[0])
    if isinstance(prompt, list):
        raise RequestRejected("batched prompts are not supported; send one prompt", param="prompt")
    raise RequestRejected("`prompt` must be a string or a list of token ids", param="prompt")


def parse_request(body: Any, kind: Kind, block_tokens: int) -> ParsedRequest:
    """Validate an OpenAI completions/chat body; RequestRejected (HTTP 400) when malformed."""
    if not isinstance(body, dict):
        raise RequestRejected("request body must be a JSON object")
    if kind == "chat":
        ids = _TOKENIZER.encode(_message_text(body.get("messages")))
    else:
        if "prompt" not in body:
            raise RequestRejected("`prompt` is required", param="prompt")
        ids = _prompt_ids(body["prompt"])
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestRejected("`model` must be a string", param="model")
    n = _int_field(body, "n")
    if n is not None and n != 1:
        raise RequestRejected("only n=1 is supported", param="n")
    max_tokens = _int_field(body, "max_completion_tokens")
    if max_tokens is None:
        max_tokens = _int_field(body, "max_tokens")
    if max_tokens is not None and max_tokens < 1:
        raise RequestRejected(
            f"`max_tokens` must be at least 1, got {max_tokens}", param="max_tokens"
        )
    min_tokens = _int_field(body, "min_tokens") or 0
    if min_tokens < 0:
        raise RequestRejected("`min_tokens` must be >= 0", param="min_tokens")
    if max_tokens is not None and min_tokens > max_tokens:
        raise RequestRejected(
            f"`min_tokens` ({min_tokens}) must be <= `max_tokens` ({max_tokens})",
            param="min_tokens",
        )
    stream = _bool_field(body, "stream", False)
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not isinstance(options, dict):
            raise RequestRejected("`stream_options` must be an object", param="stream_options")
        include_usage = _bool_field(options, "include_usage", False)
    if not ids:
        raise RequestRejected(
            "the prompt is empty", param="messages" if kind == "chat" else "prompt"
        )
    return ParsedRequest(
        kind=kind,
        model=model,
        prompt_tokens=len(ids),
        block_hashes=tuple(chained_block_hashes(ids, block_tokens)),
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        ignore_eos=_bool_field(body, "ignore_eos", False),
        stream=stream,
        include_usage=include_usage,
    )


def filler_text(offset: int, n_tokens: int) -> str:
    """The deterministic text of `n_tokens` generated tokens starting at word `offset`."""
    k = len(FILLER_TOKENS)
    return "".join(FILLER_TOKENS[(offset + i) % k] for i in range(n_tokens))


def usage_body(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


class ChunkWriter:
    """Server-sent-event chunks of one streamed response, built from cached byte pieces."""

    __slots__ = ("kind", "_head", "_mid", "_tail", "_offset", "_sent", "_id", "_created", "_model")

    def __init__(self, kind: Kind, response_id: str, created: int, model: str, offset: int):
        self.kind = kind
        self._id = response_id
        self._created = created
        self._model = model
        obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
        head = json.dumps({"id": response_id, "object": obj, "created": created, "model": model})
        head = head[:-1]  # keep the object open for "choices"
        if kind == "chat":
            self._head = f'data: {head}, "choices": [{{"index": 0, "delta": {{"content": "'.encode()
            self._tail = b'"}, "logprobs": null, "finish_reason": null}]}\n\n'
        else:
            self._head = f'data: {head}, "choices": [{{"index": 0, "text": "'.encode()
            self._tail = b'", "logprobs": null, "finish_reason": null}]}\n\n'
        self._mid = _FILLER_JSON
        self._offset = offset
        self._sent = 0

    def first(self) -> bytes:
        """The chat role chunk vLLM sends before any content (empty for completions)."""
        if self.kind != "chat":
            return b""
        return self._event(
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        )

    def tokens(self, n: int) -> bytes:
        """`n` one-token content chunks."""
        k = len(self._mid)
        head, tail, mid = self._head, self._tail, self._mid
        start = self._offset + self._sent
        self._sent += n
        if n == 1:
            return head + mid[start % k] + tail
        return b"".join(head + mid[(start + i) % k] + tail for i in range(n))

    def joined(self, n: int) -> bytes:
        """`n` tokens in one content chunk (a stream interval above one token)."""
        k = len(self._mid)
        start = self._offset + self._sent
        self._sent += n
        return self._head + b"".join(self._mid[(start + i) % k] for i in range(n)) + self._tail

    def finish(self, finish_reason: str) -> bytes:
        if self.kind == "chat":
            choice: dict[str, Any] = {"index": 0, "delta": {}, "finish_reason": finish_reason}
        else:
            choice = {"index": 0, "text": "", "finish_reason": finish_reason}
        return self._event(choice)

    def usage(self, usage: dict[str, Any]) -> bytes:
        return self._data(self._envelope([]) | {"usage": usage})

    @staticmethod
    def done() -> bytes:
        return b"data: [DONE]\n\n"

    def _envelope(self, choices: list[Any]) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        return {
            "id": self._id,
            "object": obj,
            "created": self._created,
            "model": self._model,
            "choices": choices,
        }

    def _event(self, choice: dict[str, Any]) -> bytes:
        return self._data(self._envelope([choice]))

    @staticmethod
    def _data(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj).encode() + b"\n\n"


def completion_body(
    kind: Kind,
    response_id: str,
    created: int,
    model: str,
    text: str,
    finish_reason: str,
    usage: dict[str, Any],
) -> dict[str, Any]:
    """The non-streamed response body."""
    if kind == "chat":
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        obj = "text_completion"
    return {
        "id": response_id,
        "object": obj,
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage,
    }
