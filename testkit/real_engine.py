"""A real inference engine for tests: llama.cpp's server (xllamacpp) on a random tiny Llama.

`build_random_llama(path)` writes a randomly initialised Llama as GGUF (numpy + `gguf`, no
torch) with a byte-level BPE tokenizer trained locally by `tokenizers` on the Python
standard library's sources, ChatML special tokens and a chat template. `start_llama_server`
runs `xllamacpp.Server` in a subprocess on 127.0.0.1 and polls until it answers.
Random weights produce gibberish: send `ignore_eos` and read token counts from `usage`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from planner.loadtest.netutil import free_port

CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@dataclass(frozen=True)
class LlamaShape:
    vocab: int = 4096
    hidden: int = 256
    layers: int = 4
    heads: int = 4
    kv_heads: int = 4
    ffn: int = 688
    context: int = 4096


def _training_text(max_bytes: int = 4_000_000) -> list[str]:
    """Deterministic training text: the standard library's own sources, in sorted order."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts: list[str] = []
    total = 0
    for path in sorted(stdlib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        texts.append(text)
        total += len(text)
        if total >= max_bytes:
            break
    return texts


def trained_tokenizer_json(vocab: int) -> str:
    """tokenizer.json text of a byte-level BPE trained on `_training_text`, the ChatML
    specials first (ids 0-2, marked special)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_text(), trainer=trainer)
    return tok.to_str()


def _train_tokenizer(vocab: int) -> tuple[list[str], list[str]]:
    """(tokens in id order, merges 'a b') of a byte-level BPE with the ChatML specials."""
    data = json.loads(trained_tokenizer_json(vocab))
    by_id = sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in by_id]
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    return tokens, merges


def random_weights(
    shape: LlamaShape, n_vocab: int, seed: int
) -> Iterator[tuple[str, str, np.ndarray]]:
    """(GGUF name, HF name, array) of each tensor of the random Llama, [out, in] like both
    formats store them: float16 weights drawn from N(0, 0.02) in this order, float32 norms of
    ones. Q and K are left unpermuted: random either way."""
    rng = np.random.default_rng(seed)

    def weight(*dims: int) -> np.ndarray:
        return (rng.standard_normal(dims) * 0.02).astype(np.float16)

    kv_dim = shape.kv_heads * (shape.hidden // shape.heads)
    ones = np.ones(shape.hidden, dtype=np.float32)
    yield "token_embd.weight", "model.embed_tokens.weight", weight(n_vocab, shape.hidden)
    for i in range(shape.layers):
        g, h = f"blk.{i}.", f"model.layers.{i}."
        yield g + "attn_norm.weight", h + "input_layernorm.weight", ones
        yield g + "attn_q.weight", h + "self_attn.q_proj.weight", weight(shape.hidden, shape.hidden)
        yield g + "attn_k.weight", h + "self_attn.k_proj.weight", weight(kv_dim, shape.hidden)
        yield g + "attn_v.weight", h + "self_attn.v_proj.weight", weight(kv_dim, shape.hidden)
        o_proj = weight(shape.hidden, shape.hidden)
        yield g + "attn_output.weight", h + "self_attn.o_proj.weight", o_proj
        yield g + "ffn_norm.weight", h + "post_attention_layernorm.weight", ones
        yield g + "ffn_gate.weight", h + "mlp.gate_proj.weight", weight(shape.ffn, shape.hidden)
        yield g + "ffn_up.weight", h + "mlp.up_proj.weight", weight(shape.ffn, shape.hidden)
        yield g + "ffn_down.weight", h + "mlp.down_proj.weight", weight(shape.hidden, shape.ffn)
    yield "output_norm.weight", "model.norm.weight", ones
    yield "output.weight", "lm_head.weight", weight(n_vocab, shape.hidden)


def build_random_llama(path: Path, shape: LlamaShape = LlamaShape(), seed: int = 0) -> Path:
    """Write a random-weight Llama GGUF with a trained BPE tokenizer to `path`."""
    import gguf

    tokens, merges = _train_tokenizer(shape.vocab)
    n_vocab = len(tokens)
    head_dim = shape.hidden // shape.heads
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("capplan-random-llama")
    w.add_context_length(shape.context)
    w.add_embedding_length(shape.hidden)
    w.add_block_count(shape.layers)
    w.add_feed_forward_length(shape.ffn)
    w.add_head_count(shape.heads)
    w.add_head_count_kv(shape.kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    types = [gguf.TokenType.CONTROL if t in SPECIAL else gguf.TokenType.NORMAL for t in tokens]
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML_TEMPLATE)

    for name, _, tensor in random_weights(shape, n_vocab, seed):
        w.add_tensor(name, tensor)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@dataclass
class LlamaServer:
    proc: subprocess.Popen[bytes]
    port: int
    model: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


S = TypeVar("S", bound=LlamaServer)

_SERVE = """
import sys, xllamacpp
p = xllamacpp.CommonParams()
p.model.path = sys.argv[1]
p.model_alias = {sys.argv[2]}
p.n_parallel = int(sys.argv[4])
p.n_ctx = int(sys.argv[5])
p.cont_batching = True
p.cpuparams.n_threads = int(sys.argv[6])
p.endpoint_metrics = True
p.port = int(sys.argv[3])
p.hostnames = ["127.0.0.1"]
server = xllamacpp.Server(p)
import threading
threading.Event().wait()
"""


def start_llama_server(
    model_path: Path,
    *,
    alias: str = "tiny-llama",
    n_parallel: int = 4,
    n_ctx: int = 8192,
    n_threads: int = 1,
    deadline_s: float = 60.0,
    log_path: Path | None = None,
    cpus: set[int] | None = None,
) -> LlamaServer:
    """Serve `model_path` with xllamacpp in a subprocess; poll /health until it is ready.

    `cpus` pins the server (all its threads, set before it starts) to those cores.
    """
    port = free_port()
    out = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
    cmd = [
        sys.executable,
        "-c",
        _SERVE,
        str(model_path),
        alias,
        str(port),
        str(n_parallel),
        str(n_ctx),
        str(n_threads),
    ]
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = subprocess.Popen(
        cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ), preexec_fn=pin
    )
    return wait_ready(LlamaServer(proc, port, alias), deadline_s, log_path, "llama server")


def wait_ready(server: S, deadline_s: float, log_path: Path | None, what: str) -> S:
    """`server` once its /health answers 200, polled until `deadline_s`; raises RuntimeError
    (with the tail of its log, where it has one) when it exits first or stays silent."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if server.proc.poll() is not None:
            server.stop()
            raise RuntimeError(
                f"{what} exited with code {server.proc.returncode}{log_tail(log_path)}"
            )
        try:
            with urllib.request.urlopen(server.url + "/health", timeout=1) as resp:
                if resp.status == 200:
                    return server
        except OSError:
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"{what} did not become ready in {deadline_s:g} s{log_tail(log_path)}")


def log_tail(log_path: Path | None, lines: int = 30) -> str:
    """The last `lines` lines of a server's log, as text to append to an error ('' without)."""
    if log_path is None or not log_path.exists():
        return ""
    tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    return f"; the last lines of {log_path}:\n" + "\n".join(tail)
