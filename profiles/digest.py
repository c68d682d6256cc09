"""The input files of a profile: named by paths and globs, identified by their sha256.

A profile's `source.digest` is the sha256 of its files' bytes, wherever they are: an object in
S3, GCS, Azure or on an HTTP server (profiles.remote) is streamed once through the hash,
never to disk, so the same bytes give the same digest as a local copy (an ETag would not:
a multipart upload's ETag is no hash of the content). About 0.1 s of CPU for 100 MB, on a
thread of its own while polars reads. `capplan profile` starts it as the command starts
(`start_digest`), before it imports polars, numpy and the profile models, which take one core
for 0.3 s while the other is idle; the reader then takes that digest (`started_digest`)
instead of computing it again while polars wants both cores. This module imports no more than
the standard library so that the start costs nothing.
"""

from __future__ import annotations

import glob
import hashlib
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from contracts.errors import InputError

if TYPE_CHECKING:
    from profiles.remote import RemoteFile

LogFile: TypeAlias = "Path | RemoteFile"  # a log on this machine, or an object in a store

_Identity = tuple[tuple[str, int, int], ...]  # each file's resolved path, size and mtime
_started: list[tuple[_Identity, Future[str | None]]] = []  # the one digest started, if any
_lock = threading.Lock()


def expand_paths(paths: list[str]) -> list[LogFile]:
    """Files named by `paths`, with globs expanded (sorted); InputError for a missing one.

    A URL (s3://, gs://, az://, https://; profiles.remote) names objects in a store: each is
    checked to exist and be readable, and an error names its bucket and key."""
    if not paths:
        raise InputError("no log files given")
    out: list[LogFile] = []
    for spec in paths:
        if _is_url(spec):
            from profiles.remote import expand_remote

            out.extend(expand_remote(spec))
        elif any(ch in spec for ch in "*?["):
            matches = sorted(glob.glob(spec, recursive=True))
            files = [Path(m) for m in matches if Path(m).is_file()]
            if not files:
                raise InputError(f"{spec}: no file matches this pattern")
            out.extend(files)
        else:
            p = Path(spec)
            if p.is_dir():
                raise InputError(
                    f"{p}: is a directory; give its log files, e.g. '{p / '*.jsonl'}' (quoted)"
                )
            if not p.is_file():
                raise InputError(f"{p}: file not found")
            out.append(p)
    return out


def _is_url(spec: str) -> bool:
    from profiles.remote import is_remote  # standard library only, as this module

    return is_remote(spec)


def hash_file(h: hashlib._Hash, path: LogFile) -> None:
    """Feed `path`'s bytes to `h` (OSError where it cannot be read)."""
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)


def sha256_of(paths: list[LogFile]) -> str:
    """sha256 over the files' bytes, in order (OSError where one cannot be read)."""
    h = hashlib.sha256()
    for p in paths:
        hash_file(h, p)
    return h.hexdigest()


def start_digest(paths: list[str]) -> None:
    """Start hashing the files `paths` name on a thread of its own, for `started_digest`.

    Does nothing where they do not name files (the reader then says why). A daemon thread:
    a command that fails before it reads does not wait for it at exit. Objects in a store
    are hashed by the reader instead (listing them here would cost a round trip before the
    command has even parsed its options)."""
    if any(_is_url(p) for p in paths):
        return
    try:
        files = expand_paths(paths)
        key = _identity(files)
    except (InputError, OSError):
        return
    done: Future[str | None] = Future()

    def run() -> None:
        try:
            done.set_result(sha256_of(files))
        except Exception:  # whatever it is, the reader hashes again and reports its own error
            done.set_result(None)  # (left unset, the reader would wait for it forever)

    with _lock:
        _started[:] = [(key, done)]
    threading.Thread(target=run, name="capplan-sha256", daemon=True).start()


def started_digest(files: list[LogFile]) -> str | None:
    """The sha256 `start_digest` computed of exactly these files, unchanged since (same
    paths, sizes and modification times), waiting for it; None where none was started, it
    was of other files, a file changed or one could not be read. The first reader takes the
    started digest, whatever its files: it is never kept past that."""
    with _lock:
        started = _started.pop() if _started else None
    if started is None:
        return None
    key, done = started
    try:
        if _identity(files) != key:
            return None
    except OSError:
        return None
    digest = done.result()
    return digest if digest is not None and _identity(files) == key else None


def _identity(files: list[LogFile]) -> _Identity:
    out = []
    for p in files:
        st = p.stat()
        out.append((str(p.resolve()), st.st_size, st.st_mtime_ns))
    return tuple(out)
