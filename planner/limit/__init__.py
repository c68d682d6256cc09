"""The per-instance SLO limit: the probe protocol, the search, steady-state rules, the live and
virtual-time probes, limit.json's result and `capplan limit`'s run."""
