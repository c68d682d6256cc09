"""Kept for tests written against this path: the log builders are bench.kit.logs."""

from bench.kit.logs import build_openai_log, write_jsonl

__all__ = ["build_openai_log", "write_jsonl"]
