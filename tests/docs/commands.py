"""Find the `capplan ...` command lines in the code blocks of markdown pages and check each
against the real command tree (typer's click group): an unknown command or option, or a stray
argument, is a problem. Values are not checked (FILE, a placeholder, is a fine value)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FENCE = re.compile(r"^(\s*)(```|~~~)\s*([\w+-]*)")
SKIPPED_LANGUAGES = {"yaml", "yml", "json", "python", "py", "toml", "text"}  # not shell
OPERATORS = {"|", "||", "&&", ";", "&", "(", ")", ";;"}
REDIRECT = re.compile(r"^[<>&]*[<>][<>&]*$")
SUBSTITUTION = re.compile(r"\$\([^()]*\)")
PREFIX_WORDS = {"time", "nohup", "exec", "do", "then", "else"}  # before a command
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class DocCommand:
    """One `capplan` invocation found in a page: where, and its arguments after `capplan`."""

    path: Path
    line: int
    text: str
    args: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}: {self.text}"


def code_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of every fenced code block of a language that runs commands."""
    blocks: list[tuple[int, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, language = match.groups()
        body: list[str] = []
        start = i + 2
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        if language.lower() not in SKIPPED_LANGUAGES:
            blocks.append((start, body))
    return blocks


def logical_lines(block: list[str], first: int) -> list[tuple[int, str]]:
    """Join `\\` continuations; drop shell prompts (`$ `)."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = first
    for offset, raw in enumerate(block):
        line = raw.rstrip()
        if not pending:
            start = first + offset
            line = re.sub(r"^\s*\$ ", "", line)
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        out.append((start, " ".join(pending)))
        pending = []
    if pending:
        out.append((start, " ".join(pending)))
    return out


def split_commands(line: str) -> list[list[str]]:
    """The simple commands of one shell line, split at pipes, `&&`, `;` and `&`; comments,
    redirections and `$(...)` substitutions removed (a substitution becomes one word)."""
    line = SUBSTITUTION.sub("SUBST", line)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote: not a command line
        return []
    commands: list[list[str]] = [[]]
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
        elif token in OPERATORS:
            commands.append([])
        elif REDIRECT.match(token):  # `>`, `>>`, `>&`, `<`: drop it, its target, its fd
            skip_next = True
            if commands[-1] and commands[-1][-1].isdigit():
                commands[-1].pop()
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def capplan_args(words: list[str]) -> tuple[str, ...] | None:
    """The arguments after `capplan` when this simple command runs capplan, else None."""
    i = 0
    while i < len(words) and (ENV_ASSIGNMENT.match(words[i]) or words[i] in PREFIX_WORDS):
        i += 1
    if i < len(words) and words[i].endswith("capplan"):
        return tuple(words[i + 1 :])
    if words[i : i + 3] == ["python", "-m", "capplan"] or words[i : i + 3] == [
        "python3",
        "-m",
        "capplan",
    ]:
        return tuple(words[i + 3 :])
    return None


def doc_commands(path: Path) -> list[DocCommand]:
    """Every capplan invocation in the code blocks of one markdown page."""
    found: list[DocCommand] = []
    for first, block in code_blocks(path.read_text(encoding="utf-8")):
        for number, line in logical_lines(block, first):
            for words in split_commands(line):
                args = capplan_args(words)
                if args is not None:
                    found.append(DocCommand(path, number, " ".join(line.split()), args))
    return found


def problems(group: Any, args: tuple[str, ...]) -> str | None:
    """Why these arguments are not a valid capplan command line, or None when they are.

    `group` is the click group of `typer.main.get_command(app)`. Options and their arity are
    parsed as capplan parses them; values are not converted (a placeholder is a fine value)."""
    if not args or args[0].startswith("-"):
        return None if set(args) <= {"--help", "--version"} else f"no command given: {args}"
    command = group.get_command(group.context_class(group, info_name="capplan"), args[0])
    if command is None:
        return f"unknown command {args[0]!r}"
    rest = [a for a in args[1:] if a != "--help"]
    parser = command.make_parser(command.context_class(command, info_name=f"capplan {args[0]}"))
    try:
        _, leftover, _ = parser.parse_args(rest)
    except Exception as err:  # click's (or typer's vendored click's) UsageError
        return err.format_message() if hasattr(err, "format_message") else str(err)
    if leftover:
        return f"unexpected arguments {leftover}"
    return None
