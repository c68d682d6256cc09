"""The truth cases of the limit search as slot queues, and the truth of each (the highest
Poisson rate its queue holds under the case's SLO), for bench/search_truth.py and its test."""

from __future__ import annotations

import numpy as np

from testkit.limit_truth import TruthCase
from testkit.queue_truth import loss_max_rate, mgc_max_rate
from testkit.slot_probe import SlotQueue


def queue_of(case: TruthCase) -> SlotQueue:
    low, _, high = case.tokens.partition(":")
    return SlotQueue(
        slots=case.refuse_above or case.slots,
        prefill_s=case.prefill_s,
        per_token_s=case.per_token_s,
        tokens=(int(low), int(high or low)),
        refuse=bool(case.refuse_above),
    )


def truth_of(case: TruthCase, queue: SlotQueue) -> float:
    service = queue.service_times(np.random.default_rng(12345), 20_000)
    if queue.refuse:
        return loss_max_rate(queue.slots, float(service.mean()), case.quantile)
    first = np.full(service.size, queue.prefill_s)
    return mgc_max_rate(service, first, queue.slots, case.ttft_threshold_s, case.quantile)
