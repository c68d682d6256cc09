"""GPU calibration of the engine model's roofline factors (run on a GPU machine, not in tests).

Builds a Llama-3.1-8B-shaped transformer with random bf16 weights directly on the GPU (no
download, no checkpoint), then measures
- prefill time of one sequence against prompt length (eager PyTorch, flash SDPA, causal);
- decode step time against batch size and context length (the step captured in a CUDA
  graph, as vLLM does, so Python launch overhead is not counted twice).

From those it fits the factors the engine model uses (planner/engine):
- mfu: achieved share of the GPU's dense bf16 FLOP/s in prefill (slope of time on FLOPs);
- mbu: achieved share of HBM bandwidth in decode (slope of time on bytes read);
- step_overhead_s: the fixed part of a decode step (intercept).

Usage (on the GPU machine):  python3 bench/gpu_calibrate.py --out calib.json
Smoke test on CPU:           python3 bench/gpu_calibrate.py --tiny --device cpu --out /tmp/c.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from dataclasses import asdict, dataclass
from functools import partial

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Shape:
    name: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int

    @property
    def layer_params(self) -> int:
        h, hd = self.hidden, self.head_dim
        attn = h * self.heads * hd + 2 * h * self.kv_heads * hd + self.heads * hd * h
        return attn + 3 * h * self.ffn + 2 * h

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + 2 * self.vocab * self.hidden + self.hidden

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * 2


LLAMA_8B = Shape("llama-3.1-8b", 128256, 4096, 32, 32, 8, 128, 14336)
TINY = Shape("tiny", 1000, 128, 2, 4, 2, 32, 256)

# Public spec-sheet peaks used to turn times into factors (dense bf16, HBM bandwidth).
SPECS = {
    "H200": {"bf16_flops": 989e12, "hbm_bandwidth_bytes_per_s": 4.8e12},
    "H100": {"bf16_flops": 989e12, "hbm_bandwidth_bytes_per_s": 3.35e12},
    "cpu": {"bf16_flops": 1e12, "hbm_bandwidth_bytes_per_s": 50e9},
}


class RandomLlama:
    """Llama forward pass over random weights; prefill and one decode step."""

    def __init__(self, s: Shape, device: torch.device, dtype: torch.dtype) -> None:
        self.s = s
        g = torch.Generator(device=device).manual_seed(0)

        def w(*shape: int) -> torch.Tensor:
            t = torch.empty(*shape, device=device, dtype=dtype)
            return t.normal_(0.0, 0.02, generator=g)

        self.embed = w(s.vocab, s.hidden)
        self.lm_head = w(s.hidden, s.vocab)
        self.final_norm = torch.ones(s.hidden, device=device, dtype=dtype)
        self.layers = []
        for _ in range(s.layers):
            self.layers.append(
                {
                    "wqkv": w(s.hidden, (s.heads + 2 * s.kv_heads) * s.head_dim),
                    "wo": w(s.heads * s.head_dim, s.hidden),
                    "w_gate_up": w(s.hidden, 2 * s.ffn),
                    "w_down": w(s.ffn, s.hidden),
                    "n1": torch.ones(s.hidden, device=device, dtype=dtype),
                    "n2": torch.ones(s.hidden, device=device, dtype=dtype),
                }
            )
        inv = 1.0 / (500000.0 ** (torch.arange(0, s.head_dim, 2, device=device) / s.head_dim))
        pos = torch.arange(0, 131072, device=device, dtype=torch.float32)
        freqs = torch.outer(pos, inv)
        self.cos = freqs.cos().to(dtype)
        self.sin = freqs.sin().to(dtype)

    @staticmethod
    def _norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        v = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(v + 1e-5)).to(x.dtype) * w

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # x: [B, heads, T, hd]; positions: [T] or [B, 1]
        cos, sin = self.cos[positions], self.sin[positions]
        if cos.dim() == 2:
            cos, sin = cos[None, None], sin[None, None]
        else:
            cos, sin = cos[:, None], sin[:, None]
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    def _layer(
        self,
        x: torch.Tensor,
        lw: dict[str, torch.Tensor],
        positions: torch.Tensor,
        cache: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> torch.Tensor:
        s = self.s
        b, t, _ = x.shape
        h = self._norm(x, lw["n1"])
        qkv = h @ lw["wqkv"]
        q, k, v = qkv.split(
            [s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim], -1
        )
        q = q.view(b, t, s.heads, s.head_dim).transpose(1, 2)
        k = k.view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        v = v.view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        q, k = self._rope(q, positions), self._rope(k, positions)
        if cache is None:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            kc, vc = cache
            kc[:, :, -1:, :] = k  # the new token's K/V go into the last cache slot
            vc[:, :, -1:, :] = v
            o = F.scaled_dot_product_attention(q, kc, vc, enable_gqa=True)
        x = x + o.transpose(1, 2).reshape(b, t, s.heads * s.head_dim) @ lw["wo"]
        h = self._norm(x, lw["n2"])
        gate, up = (h @ lw["w_gate_up"]).chunk(2, dim=-1)
        return x + (F.silu(gate) * up) @ lw["w_down"]

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed[tokens][None]
        positions = torch.arange(tokens.shape[0], device=tokens.device)
        for lw in self.layers:
            x = self._layer(x, lw, positions, None)
        last = self._norm(x[:, -1], self.final_norm)
        return (last @ self.lm_head).argmax(-1)

    def decode(self, tokens: torch.Tensor, positions: torch.Tensor, caches: list) -> torch.Tensor:
        x = self.embed[tokens][:, None]
        for lw, cache in zip(self.layers, caches, strict=True):
            x = self._layer(x, lw, positions, cache)
        return (self._norm(x[:, 0], self.final_norm) @ self.lm_head).argmax(-1)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _time_fn(fn, device: torch.device, warmup: int, iters: int) -> float:
    for _ in range(warmup):
        fn()
    _sync(device)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1000.0 / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def prefill_flops(s: Shape, p: int) -> float:
    linear = 2.0 * s.layers * s.layer_params * p + 2.0 * s.hidden * s.vocab  # logits: last token
    attention = 2.0 * s.layers * s.heads * s.head_dim * p * p  # QK^T and PV, causal half
    return linear + attention


def decode_flops(s: Shape, b: int, ctx: int) -> float:
    return 2.0 * (s.layers * s.layer_params + s.hidden * s.vocab) * b + (
        4.0 * s.layers * s.heads * s.head_dim * ctx * b
    )


def decode_bytes(s: Shape, b: int, ctx: int) -> float:
    weights = 2.0 * (s.layers * s.layer_params + s.hidden * s.vocab)
    return weights + float(b) * ctx * s.kv_bytes_per_token


def _fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares y = a + b x; returns (a, b)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    b = sxy / sxx
    return my - b * mx, b


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--tiny", action="store_true", help="tiny shape for a CPU smoke test")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--gpu", default="H200", choices=sorted(SPECS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=200.0, help="stop adding points after this")
    args = ap.parse_args()

    t_start = time.perf_counter()
    device = torch.device(args.device)
    shape = TINY if args.tiny else LLAMA_8B
    dtype = torch.bfloat16
    spec = SPECS["cpu" if device.type == "cpu" else args.gpu]
    model = RandomLlama(shape, device, dtype)
    gpu_name = torch.cuda.get_device_name(0) if device.type == "cuda" else platform.processor()
    print(f"device {gpu_name}; shape {shape.name}; params {shape.params / 1e9:.2f} B", flush=True)

    # Raw ceilings on this machine, for context.
    ceilings: dict[str, float] = {}
    if device.type == "cuda":
        a = torch.randn(8192, 8192, device=device, dtype=dtype)
        t = _time_fn(lambda: a @ a, device, 3, 10)
        ceilings["matmul_bf16_flops"] = 2 * 8192**3 / t
        big = torch.empty(2 * 1024**3, device=device, dtype=torch.uint8)
        dst = torch.empty_like(big)
        t = _time_fn(lambda: dst.copy_(big), device, 2, 10)
        ceilings["copy_bytes_per_s"] = 2 * big.numel() / t
        del a, big, dst
        print(f"ceilings: {json.dumps({k: f'{v:.3e}' for k, v in ceilings.items()})}", flush=True)

    prefill_points = []
    lengths = [64, 128, 256] if args.tiny else [128, 256, 512, 1024, 2048, 4096, 8192]
    for p in lengths:
        tokens = torch.randint(0, shape.vocab, (p,), device=device)
        with torch.inference_mode():
            t = _time_fn(partial(model.prefill, tokens), device, 2, 5)
        f = prefill_flops(shape, p)
        prefill_points.append(
            {"prompt_tokens": p, "time_s": t, "flops": f, "mfu": f / t / spec["bf16_flops"]}
        )
        print(
            f"prefill {p:>6} tokens: {t * 1e3:8.2f} ms  mfu {f / t / spec['bf16_flops']:.3f}",
            flush=True,
        )

    decode_points = []
    grid = (
        [(1, 128), (4, 128)]
        if args.tiny
        else [
            (1, 512),
            (1, 2048),
            (8, 512),
            (8, 2048),
            (32, 512),
            (32, 2048),
            (32, 8192),
            (64, 512),
            (64, 2048),
            (64, 8192),
            (128, 512),
            (128, 2048),
            (256, 512),
            (256, 2048),
        ]
    )
    for b, ctx in grid:
        if time.perf_counter() - t_start > args.budget_s:
            print("time budget reached; skipping the remaining decode points", flush=True)
            break
        caches = [
            (
                torch.zeros(b, shape.kv_heads, ctx, shape.head_dim, device=device, dtype=dtype),
                torch.zeros(b, shape.kv_heads, ctx, shape.head_dim, device=device, dtype=dtype),
            )
            for _ in range(shape.layers)
        ]
        tokens = torch.randint(0, shape.vocab, (b,), device=device)
        positions = torch.full((b, 1), ctx - 1, device=device, dtype=torch.long)
        with torch.inference_mode():
            if device.type == "cuda":
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    for _ in range(3):
                        model.decode(tokens, positions, caches)
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    model.decode(tokens, positions, caches)
                t = _time_fn(graph.replay, device, 3, 20)
                del graph
            else:
                t = _time_fn(partial(model.decode, tokens, positions, caches), device, 1, 3)
        nbytes, f = decode_bytes(shape, b, ctx), decode_flops(shape, b, ctx)
        decode_points.append(
            {
                "batch": b,
                "context_tokens": ctx,
                "time_s": t,
                "bytes": nbytes,
                "flops": f,
                "mbu": nbytes / t / spec["hbm_bandwidth_bytes_per_s"],
                "output_tokens_per_s": b / t,
            }
        )
        print(
            f"decode batch {b:>4} ctx {ctx:>5}: {t * 1e3:7.2f} ms/step  "
            f"{b / t:9.0f} tok/s  mbu {nbytes / t / spec['hbm_bandwidth_bytes_per_s']:.3f}",
            flush=True,
        )
        del caches
        if device.type == "cuda":
            torch.cuda.empty_cache()

    # Fits. Prefill: time = a + flops / (peak * mfu), over prompts >= 1024 (compute-bound).
    big = [p for p in prefill_points if p["prompt_tokens"] >= (128 if args.tiny else 1024)]
    _, slope = _fit_line([p["flops"] for p in big], [p["time_s"] for p in big])
    mfu = 1.0 / (slope * spec["bf16_flops"])
    # Decode: time = overhead + bytes / (bw * mbu), over memory-bound points (batch <= 64).
    mem = [p for p in decode_points if p["batch"] <= 64] or decode_points
    overhead, slope_b = _fit_line([p["bytes"] for p in mem], [p["time_s"] for p in mem])
    mbu = 1.0 / (slope_b * spec["hbm_bandwidth_bytes_per_s"])
    residuals = [abs(overhead + p["bytes"] * slope_b - p["time_s"]) / p["time_s"] for p in mem]
    result = {
        "device": gpu_name,
        "torch": torch.__version__,
        "shape": asdict(shape),
        "params": shape.params,
        "spec_used": spec,
        "ceilings_measured": ceilings,
        "prefill": prefill_points,
        "decode": decode_points,
        "fit": {
            "mfu": mfu,
            "mbu": mbu,
            "step_overhead_s": max(overhead, 0.0),
            "decode_fit_max_rel_error": max(residuals) if residuals else math.nan,
            "method": "prefill: least squares of time on FLOPs for prompts >= 1024 tokens; "
            "decode: least squares of step time on bytes read for batch <= 64, "
            "step captured in a CUDA graph",
        },
        "wall_s": time.perf_counter() - t_start,
    }
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)
    print(json.dumps(result["fit"], indent=2), flush=True)


if __name__ == "__main__":
    main()
