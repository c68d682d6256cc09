"""Request parsing and response chunks of the emulator's OpenAI wire format (no server)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from planner.emulator import RequestRejected, parse_request
from planner.emulator.protocol import ChunkWriter, filler_text
from profiles.tokenize import ApproxTokenizer, chained_block_hashes, synthetic_text


def test_completion_prompt_counts_and_hashes_like_the_profiler() -> None:
    text = synthetic_text(1000, np.random.default_rng(3))
    parsed = parse_request(
        {"model": "m", "prompt": text, "max_tokens": 7, "stream": True}, "completion", 16
    )
    assert parsed.prompt_tokens == 1000
    assert parsed.block_hashes == tuple(chained_block_hashes(ApproxTokenizer().encode(text), 16))
    assert len(parsed.block_hashes) == 1000 // 16
    assert (parsed.max_tokens, parsed.stream, parsed.include_usage) == (7, True, False)


def test_completion_prompt_as_token_ids() -> None:
    ids = list(range(40))
    for prompt in (ids, [ids]):
        parsed = parse_request({"prompt": prompt}, "completion", 16)
        assert parsed.prompt_tokens == 40
        assert parsed.block_hashes == tuple(chained_block_hashes(ids, 16))


def test_chat_messages_count_content_plus_role_tokens() -> None:
    text = synthetic_text(300, np.random.default_rng(4))
    body = {
        "messages": [
            {"role": "system", "content": "kalo mine"},
            {"role": "user", "content": [{"type": "text", "text": text}]},
        ],
        "max_completion_tokens": 5,
        "max_tokens": 99,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "min_tokens": 2,
    }
    parsed = parse_request(body, "chat", 16)
    # content (2 + 300) plus the template's `system:` (3 tokens) and `user:` (2 tokens)
    assert parsed.prompt_tokens == 2 + 300 + 3 + 2
    assert parsed.max_tokens == 5  # max_completion_tokens wins, as in the OpenAI API
    assert parsed.include_usage and parsed.ignore_eos and parsed.min_tokens == 2


@pytest.mark.parametrize(
    ("body", "kind", "param"),
    [
        ([1, 2], "chat", None),
        ({"messages": []}, "chat", "messages"),
        ({"messages": [{"content": "x"}]}, "chat", "messages"),
        ({"messages": [{"role": "user", "content": 5}]}, "chat", "messages"),
        ({"max_tokens": 3}, "completion", "prompt"),
        ({"prompt": ["a", "b"]}, "completion", "prompt"),
        ({"prompt": [[1, 2], [3]]}, "completion", "prompt"),
        ({"prompt": [1, -2]}, "completion", "prompt"),
        ({"prompt": "hi", "max_tokens": "3"}, "completion", "max_tokens"),
        ({"prompt": "hi", "max_tokens": 0}, "completion", "max_tokens"),
        ({"prompt": "hi", "max_tokens": 3, "min_tokens": 4}, "completion", "min_tokens"),
        ({"prompt": "hi", "n": 2}, "completion", "n"),
        ({"prompt": "hi", "stream": "yes"}, "completion", "stream"),
        ({"prompt": "   "}, "completion", "prompt"),
    ],
)
def test_malformed_requests_are_rejected_with_the_field(
    body: object, kind: str, param: str | None
) -> None:
    with pytest.raises(RequestRejected) as info:
        parse_request(body, kind, 16)  # type: ignore[arg-type]
    err = info.value
    assert err.status == 400
    assert err.param == param
    shape = err.body()["error"]
    assert set(shape) == {"message", "type", "param", "code"}
    assert shape["message"]


def _events(data: bytes) -> list[dict]:
    out = []
    for block in data.decode().split("\n\n"):
        if block.startswith("data: ") and block != "data: [DONE]":
            out.append(json.loads(block[len("data: ") :]))
    return out


@pytest.mark.parametrize("kind", ["chat", "completion"])
def test_chunks_are_valid_json_and_read_as_one_token_each(kind: str) -> None:
    writer = ChunkWriter(kind, "id-1", 123, "m", offset=5)  # type: ignore[arg-type]
    data = writer.first() + writer.tokens(1) + writer.tokens(3) + writer.finish("length")
    data += writer.usage({"prompt_tokens": 1}) + writer.done()
    events = _events(data)
    assert data.endswith(b"data: [DONE]\n\n")
    assert all(e["id"] == "id-1" and e["model"] == "m" for e in events)
    if kind == "chat":
        pieces = [e["choices"][0]["delta"].get("content") or "" for e in events[:-1]]
        assert events[0]["choices"][0]["delta"]["role"] == "assistant"
        pieces = pieces[1:]
    else:
        pieces = [e["choices"][0]["text"] for e in events[:-1]]
    assert "".join(pieces) == filler_text(5, 4)
    assert ApproxTokenizer().count(filler_text(5, 4)) == 4
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["choices"] == [] and events[-1]["usage"] == {"prompt_tokens": 1}
