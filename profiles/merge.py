"""Merging partial profiles of file shards (say one per day) into one: `capplan profile --merge`.

A statistic that is a count, a sum, a mean, a histogram on shared bins or a maximum merges
exactly. The rest merge with a bound or an estimate, and the merged profile says which in
`merge` (`exact`, `bounds` with the interval that holds the whole-log value, `estimated`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np

from contracts import __version__
from contracts.errors import InputError
from profiles.lengths import SAMPLER_PAIRS, _Counts, spearman
from profiles.merge_arrivals import MergeNotes, merge_arrivals
from profiles.model import (
    Bound,
    Histogram,
    Lengths,
    LengthStats,
    LruPoint,
    MergeInfo,
    Prefix,
    Profile,
    ProfileBody,
    Quantiles,
    Sessions,
    SharedPrefix,
    Source,
)
from profiles.prefix import TOP_PREFIXES
from profiles.sketch import merge_sketches, sketch_quantiles

QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}

__all__ = ["merge_profiles"]


def _epoch(profile: Profile) -> float | None:
    ts = profile.source.first_timestamp
    if ts is None:
        return None
    t = datetime.fromisoformat(ts)
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def _timeline(profiles: list[Profile], names: list[str]) -> tuple[list[int], list[float], str]:
    """Order of the shards on the merged timeline, their start offsets (s), and how."""
    epochs = [_epoch(p) for p in profiles]
    if all(e is not None for e in epochs):
        order = sorted(range(len(profiles)), key=lambda i: epochs[i])  # type: ignore[arg-type, return-value]
        t0 = epochs[order[0]]
        offsets: list[float] = [epochs[i] - t0 for i in order]  # type: ignore[operator]
        for a, b, off_a, off_b in zip(order, order[1:], offsets, offsets[1:], strict=False):
            end_a = off_a + profiles[a].arrivals.duration_s
            if off_b < end_a - 1e-6:
                raise InputError(
                    f"{names[b]} starts {end_a - off_b:.3f} s before {names[a]} ends: shards "
                    "must not overlap in time (split the logs by time, or profile them together)"
                )
        how = "by each shard's first_timestamp (wall-clock times), sorted by it"
        return order, offsets, how
    if any(e is not None for e in epochs):
        missing = [names[i] for i, e in enumerate(epochs) if e is None]
        raise InputError(
            f"{', '.join(missing)}: no first_timestamp (the log had relative times) while other "
            "shards have one; merge only shards that all have wall-clock times, or none does"
        )
    offsets = []
    t = 0.0
    for p in profiles:
        offsets.append(t)
        arr = p.arrivals
        t += arr.duration_s + (1 / arr.mean_rate_rps if arr.mean_rate_rps > 0 else 0.0)
    how = (
        "back to back in the order given (the logs have relative times): each shard starts one "
        "mean inter-arrival time after the previous one ends"
    )
    return list(range(len(profiles))), offsets, how


def merge_profiles(
    profiles: list[Profile], names: list[str], *, seed: int = 0, now: datetime | None = None
) -> Profile:
    """One profile of the union of the shards' requests; InputError if they cannot merge
    (a preset, different --group-by or --block-tokens, overlapping times, no sketches)."""
    if not profiles:
        raise InputError("--merge: no partial profiles given")
    for p, name in zip(profiles, names, strict=True):
        if p.source.format == "preset":
            raise InputError(f"{name}: a preset profile cannot be merged (it has no requests)")
        if p.lengths.input.sketch is None or p.lengths.output.sketch is None:
            raise InputError(
                f"{name}: no length sketches (written by an older capplan); profile its logs again"
            )
    if len({p.group_by for p in profiles}) > 1:
        raise InputError("--merge: the shards were profiled with different --group-by")
    if len({p.prefix.block_tokens for p in profiles}) > 1:
        raise InputError("--merge: the shards were profiled with different --block-tokens")
    order, offsets, how = _timeline(profiles, names)
    profiles = [profiles[i] for i in order]
    names = [names[i] for i in order]
    notes = MergeNotes()
    body = _merge_body(profiles, offsets, "", notes, seed, [_sampled(p, "") for p in profiles])
    groups = {}
    for g in sorted({g for p in profiles for g in p.groups}):
        have = [(p, o) for p, o in zip(profiles, offsets, strict=True) if g in p.groups]
        gnotes = MergeNotes()
        groups[g] = _merge_body(
            [p.groups[g] for p, _ in have],
            [o for _, o in have],
            f"groups.{g}.",
            gnotes,
            seed,
            [_sampled(p, f"groups.{g}.") for p, _ in have],
        )
        gnotes.estimated[f"groups.{g}.arrivals"] = (
            "joined at the shards' starts (a group's first request is not stored)"
        )
        notes.exact += [k for k in gnotes.exact if ".arrivals." not in k]
        notes.bounds.update(gnotes.bounds)
        notes.estimated.update(gnotes.estimated)
    return Profile(
        **body.model_dump(),
        name=profiles[0].name,
        created_at=(now or datetime.now(UTC)).isoformat(timespec="seconds"),
        capplan_version=__version__,
        source=_merge_source([p.source for p in profiles], names, notes),
        group_by=profiles[0].group_by,
        groups=groups,
        merge=MergeInfo(
            shards=names,
            timeline=how,
            exact=notes.exact,
            bounds=notes.bounds,
            estimated=notes.estimated,
        ),
    )


def _merge_source(sources: list[Source], names: list[str], notes: MergeNotes) -> Source:
    reasons: dict[str, int] = {}
    for s in sources:
        for why, n in s.skip_reasons.items():
            reasons[why] = reasons.get(why, 0) + n
    formats = list(dict.fromkeys(s.format for s in sources))
    notes.exact += ["source.rows", "source.rows_skipped", "source.skip_reasons"]
    return Source(
        files=[f for s in sources for f in s.files],
        format="+".join(formats),
        rows=sum(s.rows for s in sources),
        rows_skipped=sum(s.rows_skipped for s in sources),
        skip_reasons=reasons,
        skip_examples=[e for s in sources for e in s.skip_examples][:10],
        tokens_estimated=any(s.tokens_estimated for s in sources),
        tokenizer=next((s.tokenizer for s in sources if s.tokenizer), None),
        warnings=[f"{n}: {w}" for s, n in zip(sources, names, strict=True) for w in s.warnings],
        first_timestamp=next((s.first_timestamp for s in sources if s.first_timestamp), None),
        digest=hashlib.sha256("".join(s.digest for s in sources).encode()).hexdigest(),
    )


def _sampled(profile: Profile, key: str) -> dict[str, Bound]:
    """The bounds a shard's profile gives its sampled statistics under `key` (a body's key
    prefix), by the rest of their key path."""
    chunked = profile.source.read_in_chunks
    if chunked is None:
        return {}
    return {k[len(key) :]: b for k, b in chunked.bounds.items() if k.startswith(key)}


def _merge_body(
    bodies: Sequence[ProfileBody],
    offsets: list[float],
    key: str,
    notes: MergeNotes,
    seed: int,
    sampled: list[dict[str, Bound]],
) -> ProfileBody:
    n = [b.requests for b in bodies]
    total = sum(n)
    ok_share = None
    if all(b.ok_share is not None for b in bodies):
        ok_share = sum((b.ok_share or 0.0) * c for b, c in zip(bodies, n, strict=True)) / total
        notes.exact.append(f"{key}ok_share")
    notes.exact.append(f"{key}requests")
    return ProfileBody(
        arrivals=merge_arrivals([b.arrivals for b in bodies], n, offsets, f"{key}arrivals", notes),
        lengths=_merge_lengths([b.lengths for b in bodies], f"{key}lengths", notes, seed),
        prefix=_merge_prefix([b.prefix for b in bodies], f"{key}prefix", notes, sampled),
        sessions=_merge_sessions([b.sessions for b in bodies], f"{key}sessions", notes),
        ok_share=ok_share,
        requests=total,
    )


def _merge_stats(
    parts: list[LengthStats], n: list[int], key: str, notes: MergeNotes
) -> LengthStats:
    total = sum(n)
    sketch = merge_sketches([p.sketch for p in parts if p.sketch is not None])
    alpha = sketch.relative_accuracy
    lo, hi = min(p.min for p in parts), max(p.max for p in parts)
    q = dict(
        zip(QUANTILES, sketch_quantiles(sketch, np.array(list(QUANTILES.values()))), strict=True)
    )
    for name, value in q.items():
        notes.bounds[f"{key}.{name}"] = Bound(
            low=max(lo, value / (1 + alpha)),
            high=min(hi, value / (1 - alpha)),
            method=f"merged DDSketch (relative accuracy {alpha})",
        )
    hists = [p.histogram for p in parts]
    widest = max(hists, key=lambda h: len(h.edges))
    counts = np.zeros(len(widest.counts), dtype=np.int64)
    for h in hists:
        if h.edges != widest.edges[: len(h.edges)]:
            raise InputError(f"--merge: {key} histograms have different bins")
        counts[: len(h.counts)] += h.counts
    notes.exact += [f"{key}.{k}" for k in ("mean", "min", "max", "histogram")]
    return LengthStats(
        mean=sum(p.mean * c for p, c in zip(parts, n, strict=True)) / total,
        min=lo,
        max=hi,
        histogram=Histogram(edges=widest.edges, counts=counts.tolist()),
        sketch=sketch,
        p50=float(q["p50"]),
        p90=float(q["p90"]),
        p95=float(q["p95"]),
        p99=float(q["p99"]),
    )


def _merge_lengths(parts: list[Lengths], key: str, notes: MergeNotes, seed: int) -> Lengths:
    n = [p.requests or len(p.sampler.pairs) for p in parts]
    total = sum(n)
    shares = {
        c: sum(p.classes.shares.get(c, 0.0) * k for p, k in zip(parts, n, strict=True)) / total
        for c in parts[0].classes.shares
    }
    notes.exact.append(f"{key}.classes")
    # A uniform sample of the union: how many pairs each shard gives is one multivariate
    # hypergeometric draw; each shard's pairs are already a uniform sample in random order.
    rng = np.random.default_rng(seed)
    k = min(total, SAMPLER_PAIRS)
    take = rng.multivariate_hypergeometric(np.array(n, dtype=np.int64), k)
    pairs = [pair for p, t in zip(parts, take, strict=True) for pair in p.sampler.pairs[:t]]
    pairs = [pairs[i] for i in rng.permutation(len(pairs))]
    notes.estimated[f"{key}.sampler"] = "a uniform sample of the union (drawn from the shards')"
    arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    rho = spearman(_Counts(arr[:, 0]), _Counts(arr[:, 1]))
    notes.estimated[f"{key}.io_rank_correlation"] = (
        f"from the merged {len(pairs)}-pair sample (standard error about "
        f"{1 / max(len(pairs) - 3, 1) ** 0.5:.3f})"
    )
    return Lengths(
        input=_merge_stats([p.input for p in parts], n, f"{key}.input", notes),
        output=_merge_stats([p.output for p in parts], n, f"{key}.output", notes),
        classes=parts[0].classes.model_copy(update={"shares": shares}),
        io_rank_correlation=rho,
        sampler=parts[0].sampler.model_copy(update={"seed": seed, "pairs": pairs}),
        requests=total,
    )


def _lru_at(p: Prefix, size: int) -> float | None:
    """A shard's LRU hit ratio at `size`; past its largest size the cache held every block."""
    curve = {pt.cache_tokens: pt.hit_ratio for pt in p.lru_hit_ratio}
    if size in curve:
        return curve[size]
    if curve and size > max(curve) and abs(curve[max(curve)] - (p.ideal_hit_ratio or 0.0)) < 1e-12:
        return curve[max(curve)]
    return None


def _merge_prefix(
    parts: list[Prefix], key: str, notes: MergeNotes, sampled: list[dict[str, Bound]]
) -> Prefix:
    """Reuse inside a shard stays a hit in the whole log (an LRU stack distance between two
    accesses of one shard is the same); a shard's first touches of a block may hit blocks of
    earlier shards. So the whole-log ratio lies between the shards' hits alone and those plus
    every first touch in the second shard onwards. Where a shard's ratio was sampled (a
    shard past the exact budget, profiles.prefix_bounded), its own bounds widen these."""
    req = [p.requests for p in parts]
    reported = None
    with_ratio = [(p.reported_cached_token_ratio, r) for p, r in zip(parts, req, strict=True)]
    if any(r is not None for r, _ in with_ratio):
        known = [(r, w) for r, w in with_ratio if r is not None]
        reported = sum(r * w for r, w in known) / max(sum(w for _, w in known), 1)
        notes.estimated[f"{key}.reported_cached_token_ratio"] = "weighted by hashed requests"
    block = parts[0].block_tokens
    if not all(p.available and p.hashed_tokens > 0 for p in parts):
        if any(p.available for p in parts):
            notes.estimated[f"{key}"] = "not merged: some shards have no prefix hashes"
        return Prefix(available=False, block_tokens=block, reported_cached_token_ratio=reported)
    tokens = np.array([p.hashed_tokens for p in parts], dtype=np.float64)
    total = float(tokens.sum())

    def ratios(name: str, values: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each shard's value of a ratio and its low and high bounds."""
        bounds = [s.get(f"prefix.{name}") for s in sampled]
        low = [b.low if b else v for b, v in zip(bounds, values, strict=True)]
        high = [b.high if b else v for b, v in zip(bounds, values, strict=True)]
        return np.array(values), np.array(low), np.array(high)

    ideal, ideal_low, ideal_high = ratios(
        "ideal_hit_ratio", [p.ideal_hit_ratio or 0.0 for p in parts]
    )
    first_touch = float((tokens[1:] * (1 - ideal_low[1:])).sum())
    hits = float((tokens * ideal).sum())
    method = "shards' own hits (low) plus every first touch after the first shard (high)"
    if any(sampled):
        method += "; sampled shards' own bounds"
    notes.bounds[f"{key}.ideal_hit_ratio"] = Bound(
        low=float((tokens * ideal_low).sum()) / total,
        high=min(1.0, (float((tokens * ideal_high).sum()) + first_touch) / total),
        method=method,
    )
    curve = []
    for size in sorted({pt.cache_tokens for p in parts for pt in p.lru_hit_ratio}):
        at = [_lru_at(p, size) for p in parts]
        if any(a is None for a in at):
            continue
        value, low, high = ratios(f"lru_hit_ratio[{size}]", [float(a or 0.0) for a in at])
        lru_hits = float((tokens * value).sum())
        curve.append(LruPoint(cache_tokens=size, hit_ratio=lru_hits / total))
        notes.bounds[f"{key}.lru_hit_ratio[{size}]"] = Bound(
            low=float((tokens * low).sum()) / total,
            high=min(1.0, (float((tokens * high).sum()) + first_touch) / total),
            method=method,
        )
    n_req = sum(req)
    by_len: dict[int, list[float]] = {}
    for p, r, t in zip(parts, req, tokens, strict=True):
        for sp in p.top_prefixes:
            acc = by_len.setdefault(sp.prefix_tokens, [0.0, 0.0])
            acc[0] += sp.request_share * r
            acc[1] += sp.token_share * t
    top = sorted(by_len.items(), key=lambda kv: -kv[1][1])[:TOP_PREFIXES]
    notes.estimated[f"{key}.top_prefixes"] = "shards' top prefixes, matched by length"
    notes.estimated[f"{key}.ideal_hit_ratio"] = "the low bound (no reuse across shards)"
    notes.exact += [f"{key}.requests", f"{key}.hashed_tokens"]
    return Prefix(
        available=True,
        block_tokens=block,
        ideal_hit_ratio=hits / total,
        lru_hit_ratio=curve,
        top_prefixes=[
            SharedPrefix(prefix_tokens=k, request_share=v[0] / n_req, token_share=v[1] / total)
            for k, v in top
        ],
        top_prefixes_request_share=sum(
            (p.top_prefixes_request_share or 0) * r for p, r in zip(parts, req, strict=True)
        )
        / n_req,
        top_prefixes_token_share=sum(
            (p.top_prefixes_token_share or 0) * t for p, t in zip(parts, tokens, strict=True)
        )
        / total,
        reported_cached_token_ratio=reported,
        hashes_from=parts[0].hashes_from,
        requests=n_req,
        hashed_tokens=int(total),
    )


def _merge_quantiles(parts: list[Quantiles | None], weights: list[float]) -> Quantiles | None:
    have = [(q, w) for q, w in zip(parts, weights, strict=True) if q is not None]
    if not have:
        return None
    wsum = sum(w for _, w in have) or 1.0
    avg = {k: sum(getattr(q, k) * w for q, w in have) / wsum for k in ("mean", "p50", "p90", "p99")}
    return Quantiles(**avg, max=max(q.max for q, _ in have))


def _merge_sessions(parts: list[Sessions], key: str, notes: MergeNotes) -> Sessions:
    have = [s for s in parts if s.available]
    if not have:
        return Sessions(available=False)
    counts = [float(s.count) for s in have]
    notes.estimated[key] = (
        "sessions that span a join count once per shard; quantiles are the session-weighted "
        "means of the shards' (a mixture's quantile lies between the shards' own)"
    )
    return Sessions(
        available=True,
        count=int(sum(counts)),
        turns=_merge_quantiles([s.turns for s in have], counts),
        think_time_s=_merge_quantiles([s.think_time_s for s in have], counts),
        context_growth_tokens=_merge_quantiles([s.context_growth_tokens for s in have], counts),
        multi_turn_request_share=sum(
            (s.multi_turn_request_share or 0) * c for s, c in zip(have, counts, strict=True)
        )
        / (sum(counts) or 1),
        sample_share=min(s.sample_share for s in have),
    )


def load_shards(paths: list[str]) -> tuple[list[Profile], list[str]]:
    """Read partial profiles (globs allowed); InputError naming a bad file."""
    from profiles.model import load_profile
    from profiles.readers import expand_paths
    from profiles.remote import RemoteFile

    files = expand_paths(paths)
    for f in files:
        if isinstance(f, RemoteFile):
            raise InputError(f"{f}: --merge reads partial profiles from local files only")
    return [load_profile(f) for f in files if not isinstance(f, RemoteFile)], [
        str(f) for f in files
    ]
