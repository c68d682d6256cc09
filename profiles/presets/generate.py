"""Regenerate the preset profiles in profiles/presets/*.json (run by a developer, not at runtime).

    python -m profiles.presets.generate [--data ../shared/data]

chat and rag are profiles of shipped public traces; agent and batch are profiles of seeded
synthetic traces built here (there is no public trace of those shapes in ../shared/data), run
through the same profiler so every field is filled the same way.
"""

from __future__ import annotations

import argparse
import hashlib
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from profiles.assemble import profile_from_result
from profiles.model import Profile, save_profile
from profiles.readers import ReadResult, read_requests

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parents[1] / ".." / "shared" / "data"
GENERATED_AT = datetime(2026, 11, 29, tzinfo=UTC)
BLOCK_TOKENS = 16

DERIVATIONS = {
    "chat": (
        "Profile of the Azure LLM inference conversation trace (AzureLLMInferenceTrace_conv.csv, "
        "one hour of a production conversation service on 2023-11-16, CC-BY 4.0): arrivals, "
        "lengths and sampler as measured. The trace has no prompt text or block ids, so prefix "
        "reuse is not available (give --shared-prefix-tokens/--shared-prefix-share to add it)."
    ),
    "rag": (
        "Profile of the Mooncake synthetic trace (kvcache-ai/Mooncake, FAST'25 release, "
        "Apache-2.0): long inputs (mean ~15k tokens), short outputs, and long shared context "
        "from its 512-token block ids (ideal prefix hit ratio ~0.65), arrivals as measured."
    ),
    "agent": (
        "Profile of a seeded synthetic trace (profiles/presets/generate.py, seed 7): sessions "
        "arrive as a Poisson process at 0.4/s; each has 2-20 turns (geometric, mean 6); every "
        "prompt starts with one 3,008-token system prompt with tool definitions; each turn's "
        "prompt is the previous prompt plus the previous answer plus a tool result or user "
        "message (lognormal, median 400 tokens); answers are short (lognormal, median 120); "
        "think time between turns is lognormal (median 8 s). No public agent trace is shipped."
    ),
    "batch": (
        "Profile of a seeded synthetic trace (profiles/presets/generate.py, seed 11): offline "
        "batch jobs submitted at a steady 2 req/s (gamma inter-arrivals, shape 20: smooth); "
        "inputs drawn from the Azure conversation trace's input lengths plus one shared "
        "512-token instruction template; long outputs (lognormal, median 900 tokens, capped "
        "at 8192)."
    ),
}


def _synthetic_result(frame: pl.DataFrame, name: str) -> ReadResult:
    frame = frame.sort("arrival_s", maintain_order=True)
    frame = frame.with_columns(pl.col("arrival_s") - frame["arrival_s"][0])
    digest = hashlib.sha256(frame.write_ipc(None).getvalue()).hexdigest()
    return ReadResult(
        frame=frame,
        format="synthetic",
        files=[f"synthetic:{name}"],
        rows_skipped=0,
        skip_reasons={},
        skip_examples=[],
        tokens_estimated=False,
        tokenizer=None,
        warnings=[],
        first_timestamp=None,
        block_tokens=BLOCK_TOKENS,
        digest=digest,
    )


def agent_frame(seed: int = 7, duration_s: float = 1800.0) -> pl.DataFrame:
    """Multi-turn agent sessions with chained block ids (see DERIVATIONS['agent'])."""
    rng = np.random.default_rng(seed)
    system_blocks = 3008 // BLOCK_TOKENS
    next_id = system_blocks
    rows: dict[str, list] = {
        k: []
        for k in (
            "arrival_s",
            "input_tokens",
            "output_tokens",
            "session_id",
            "block_hashes",
            "hash_tokens",
        )
    }
    t = 0.0
    session = 0
    while True:
        t += rng.exponential(1 / 0.4)
        if t >= duration_s:
            break
        turns = int(min(20, max(2, rng.geometric(1 / 6))))
        context = 3008
        blocks: list[int] = list(range(system_blocks))
        at = t
        for _ in range(turns):
            context += int(rng.lognormal(np.log(400), 0.8))
            full = context // BLOCK_TOKENS
            while len(blocks) < full:
                blocks.append(next_id)
                next_id += 1
            out = int(max(1, min(4096, rng.lognormal(np.log(120), 0.7))))
            rows["arrival_s"].append(at)
            rows["input_tokens"].append(context)
            rows["output_tokens"].append(out)
            rows["session_id"].append(f"s{session}")
            rows["block_hashes"].append(list(blocks))
            rows["hash_tokens"].append(context)
            # The answer (and next message) complete the last partial block: it gets a new id
            # when the next turn's prompt is cut into blocks, as its content is new.
            context += out
            at += rng.lognormal(np.log(8), 0.6)
        session += 1
    return pl.DataFrame(
        {
            "arrival_s": pl.Series(rows["arrival_s"], dtype=pl.Float64),
            "input_tokens": pl.Series(rows["input_tokens"], dtype=pl.Int64),
            "output_tokens": pl.Series(rows["output_tokens"], dtype=pl.Int64),
            "session_id": pl.Series(rows["session_id"], dtype=pl.String),
            "block_hashes": pl.Series(rows["block_hashes"], dtype=pl.List(pl.UInt64)),
            "hash_tokens": pl.Series(rows["hash_tokens"], dtype=pl.Int64),
        }
    )


def batch_frame(
    azure_inputs: np.ndarray, seed: int = 11, duration_s: float = 1800.0
) -> pl.DataFrame:
    """Smooth batch submissions with a shared template (see DERIVATIONS['batch'])."""
    rng = np.random.default_rng(seed)
    n = int(duration_s * 2.0)
    gaps = rng.gamma(20.0, 1 / (2.0 * 20.0), size=n)
    arrival = np.cumsum(gaps)
    template_blocks = 512 // BLOCK_TOKENS
    inputs = 512 + rng.choice(azure_inputs, size=n)
    outputs = np.minimum(8192, np.maximum(1, rng.lognormal(np.log(900), 0.6, size=n))).astype(
        np.int64
    )
    hashes = []
    next_id = template_blocks
    for n_in in inputs:
        full = int(n_in) // BLOCK_TOKENS
        own = list(range(next_id, next_id + full - template_blocks))
        next_id += len(own)
        hashes.append(list(range(template_blocks)) + own)
    return pl.DataFrame(
        {
            "arrival_s": arrival,
            "input_tokens": inputs.astype(np.int64),
            "output_tokens": outputs,
            "block_hashes": pl.Series(hashes, dtype=pl.List(pl.UInt64)),
            "hash_tokens": inputs.astype(np.int64),
        }
    )


def _as_preset(p: Profile, name: str, files: list[str]) -> Profile:
    source = p.source.model_copy(
        update={
            "files": files,
            "format": "preset",
            "preset": name,
            "derivation": DERIVATIONS[name],
            "digest": hashlib.sha256(
                (p.source.digest + name + DERIVATIONS[name]).encode()
            ).hexdigest(),
        }
    )
    return p.model_copy(
        update={
            "name": name,
            "created_at": GENERATED_AT.isoformat(timespec="seconds"),
            "source": source,
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    azure = args.data / "AzureLLMInferenceTrace_conv.csv"
    mooncake = args.data / "mooncake_synthetic_trace.jsonl"
    out: dict[str, Profile] = {}
    az = read_requests([str(azure)])
    out["chat"] = _as_preset(profile_from_result(az, now=GENERATED_AT), "chat", [azure.name])
    mc = read_requests([str(mooncake)])
    out["rag"] = _as_preset(profile_from_result(mc, now=GENERATED_AT), "rag", [mooncake.name])
    ag = _synthetic_result(agent_frame(), "agent")
    out["agent"] = _as_preset(profile_from_result(ag, now=GENERATED_AT), "agent", ag.files)
    bt = _synthetic_result(batch_frame(az.frame["input_tokens"].to_numpy()), "batch")
    out["batch"] = _as_preset(profile_from_result(bt, now=GENERATED_AT), "batch", bt.files)
    for name, prof in out.items():
        save_profile(prof, HERE / f"{name}.json")
        print(
            f"{name}: {prof.source.rows} requests, {prof.arrivals.mean_rate_rps:.2f} req/s, "
            f"input mean {prof.lengths.input.mean:.0f}, "
            f"output mean {prof.lengths.output.mean:.0f}, ideal hit {prof.prefix.ideal_hit_ratio}"
        )


if __name__ == "__main__":
    main()
