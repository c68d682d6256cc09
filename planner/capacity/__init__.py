"""Capacity: the plan's arithmetic, the plan itself, the queueing cross-check."""
