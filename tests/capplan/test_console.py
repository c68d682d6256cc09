"""Console output: one spelling per unit, counted nouns, whole tables when piped."""

from __future__ import annotations

import pytest
from rich.table import Table

from capplan.commands.console import PIPED_WIDTH, counted, stderr_console, stdout_console
from contracts.limit import unit_label


def test_units_and_counts_read_as_words() -> None:
    assert (unit_label("rps"), unit_label("users")) == ("req/s", "users")
    assert (counted(1, "instance"), counted(3, "candidate")) == ("1 instance", "3 candidates")
    assert counted(12000, "simulated request") == "12,000 simulated requests"


def test_a_piped_console_keeps_every_column_head_whole() -> None:
    console = stdout_console()  # pytest's stdout is not a TTY
    assert console.width == PIPED_WIDTH
    heads = ("rank", "candidate", "limit req/s", "out tok/s", "binding", "e2e p95", "n", "GPUs",
             "$/month", "$/M out", "Pareto")  # fmt: skip
    table = Table()
    for head in heads:
        table.add_column(head)
    table.add_row(
        "1", "H100-80GB tp=1 max_num_seqs=256 chunked", "15.5", "4,650", "ttft", *"1234", "5", "*"
    )
    with console.capture() as captured:
        console.print(table)
    assert all(head in captured.get() for head in heads) and "…" not in captured.get()


def test_piped_sentences_stay_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A sentence longer than PIPED_WIDTH, on stdout and stderr (both pipes under pytest),
    comes out on one line: a log read with grep never sees one broken mid-sentence."""
    sentence = " ".join(["n=3 does not meet the SLO at ttft p95 1.14 s"] * 8)
    assert len(sentence) > PIPED_WIDTH
    stdout_console().print(sentence)
    stderr_console().print(sentence)
    captured = capsys.readouterr()
    assert captured.out == sentence + "\n"
    assert captured.err == sentence + "\n"
