"""Kept for tests written against this path: the one Profile factory is bench.kit.profiles."""

from bench.kit.profiles import make_profile

__all__ = ["make_profile"]
