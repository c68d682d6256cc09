"""Logs where they live: objects in S3, Google Cloud Storage, Azure Blob Storage and on HTTP(S)
servers, named by URL (globs too), read in place, never copied to disk.

`expand_remote(url)` lists the objects a URL or glob names (`RemoteFile`s, each checked to
exist and be readable), `RemoteFile.open()` is a seekable, buffered byte stream over ranged
GETs (the line readers, the format sniffing and the sha256 read it as they read a local
file), and `polars_source(path)` is what polars' own cloud readers scan (`scan_parquet`,
`scan_csv`: a Parquet object is read by ranges of row groups, never whole).

Credentials and endpoints come from each provider's standard environment variables, as both
obstore (listing, heads, byte streams) and polars (scans) read them from the same Rust
object_store: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
`AWS_REGION`, `AWS_ENDPOINT_URL` (S3-compatible stores; `AWS_ALLOW_HTTP=true` for a plain
http endpoint), web identity and instance metadata; `GOOGLE_APPLICATION_CREDENTIALS` or
`GOOGLE_SERVICE_ACCOUNT`; `AZURE_STORAGE_ACCOUNT_NAME` with `AZURE_STORAGE_ACCOUNT_KEY`,
a SAS token or a service principal.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from contracts.errors import InputError

# URL scheme -> provider, as object_store names them (gs/gcs, az/abfs/abfss/azure, s3/s3a).
SCHEMES = {
    "s3": "S3",
    "s3a": "S3",
    "gs": "Google Cloud Storage",
    "gcs": "Google Cloud Storage",
    "az": "Azure Blob Storage",
    "azure": "Azure Blob Storage",
    "abfs": "Azure Blob Storage",
    "abfss": "Azure Blob Storage",
    "http": "HTTP",
    "https": "HTTP",
}
_GLOB = re.compile(r"[*?\[]")
READ_BUFFER_BYTES = 8 << 20  # one ranged GET per 8 MiB read in sequence


def is_remote(spec: str) -> bool:
    """Whether `spec` is a URL of an object store or an HTTP(S) server (not a local path)."""
    scheme, sep, _ = spec.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


@dataclass(frozen=True)
class RemoteFile:
    """One object in a store, as the readers take a file: `open`, `stat`, `name`, `str`."""

    url: str  # scheme://bucket/key as the user would write it
    bucket: str  # the bucket, container or host
    key: str  # the object's path inside it
    size: int
    etag: str | None
    modified: datetime | None
    store: Any = field(repr=False, compare=False)  # obstore store of the bucket

    def __str__(self) -> str:
        return self.url

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    def is_file(self) -> bool:
        return True

    def stat(self) -> _ObjectStat:
        stamp = int(self.modified.timestamp() * 1e9) if self.modified else 0
        return _ObjectStat(st_size=self.size, st_mtime_ns=stamp)

    def resolve(self) -> RemoteFile:
        return self

    def open(self, mode: str = "rb") -> io.BufferedReader:
        """A buffered, seekable binary stream of the object, fetched by ranges as it is read;
        InputError naming the bucket and key when it is missing or access is denied."""
        if mode != "rb":
            raise ValueError(f"{self.url}: objects are opened for reading bytes only")
        import obstore

        with object_errors(self):
            reader = obstore.open_reader(self.store, self.key, buffer_size=READ_BUFFER_BYTES)
        return io.BufferedReader(_ObjectStream(reader, self), READ_BUFFER_BYTES)


@dataclass(frozen=True)
class _ObjectStat:
    st_size: int
    st_mtime_ns: int


class _ObjectStream(io.RawIOBase):
    """obstore's ranged reader as a raw byte stream (its reads return buffers, not bytes)."""

    def __init__(self, reader: Any, obj: RemoteFile) -> None:
        self._reader, self._obj = reader, obj

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._reader.seek(offset, whence))

    def tell(self) -> int:
        return int(self._reader.tell())

    def readinto(self, buffer: Any) -> int:
        with object_errors(self._obj):
            data = memoryview(self._reader.read(len(buffer)))
        n = len(data)
        buffer[:n] = data
        return n

    def close(self) -> None:
        if not self.closed:
            self._reader.close()
        super().close()


@contextmanager
def object_errors(obj: RemoteFile | tuple[str, str, str]) -> Iterator[None]:
    """Turn a store's error about `obj` (an object, or its URL, bucket and key) into one
    InputError naming its bucket and key and saying whether the object is missing or access
    was denied."""
    url, bucket, key = (obj.url, obj.bucket, obj.key) if isinstance(obj, RemoteFile) else obj
    try:
        yield
    except InputError:
        raise
    except Exception as err:
        message = describe_error(url, bucket, key, err)
        if message is None:
            raise
        raise InputError(message) from err


def describe_error(url: str, bucket: str, key: str, err: BaseException) -> str | None:
    """The message for a store's error on `bucket`/`key` (None for an error of another kind)."""
    from obstore import exceptions as ox

    web = bucket.startswith(("http://", "https://"))
    where = f"{url}: " + (
        f"server {bucket}, path {key!r}" if web else f"bucket {bucket!r}, key {key!r}"
    )
    if isinstance(err, ox.NotFoundError | FileNotFoundError):
        return f"{where}: no such object (the key or the bucket is missing)"
    # A refused listing comes back as a generic error carrying the 403.
    denied = isinstance(err, ox.BaseError) and "403 Forbidden" in str(err)
    if denied or isinstance(
        err, ox.PermissionDeniedError | ox.UnauthenticatedError | PermissionError
    ):
        return (
            f"{where}: access denied (the store refused these credentials; check the "
            f"provider's environment variables, e.g. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, "
            f"GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_ACCOUNT_KEY)"
        )
    if isinstance(err, ox.BaseError):
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"{where}: cannot read ({first})"
    return None


def _split(url: str) -> tuple[str, str, str]:
    """(scheme, bucket or host, key) of an object URL; InputError for one without a bucket."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    bucket = parts.netloc
    key = parts.path.lstrip("/")
    if scheme in ("http", "https"):
        return scheme, f"{scheme}://{bucket}", key
    if not bucket:
        raise InputError(f"{url}: no bucket (expected {scheme}://BUCKET/KEY)")
    if scheme in ("abfs", "abfss") and "@" in bucket:
        bucket = bucket.split("@", 1)[0]  # container@account.dfs.core.windows.net
    return scheme, bucket, key


def _store(url: str, scheme: str, bucket: str) -> Any:
    """The obstore store of `bucket`, configured from the provider's environment variables."""
    from obstore.store import from_url

    root = bucket if scheme in ("http", "https") else f"{scheme}://{urlsplit(url).netloc}"
    try:
        if scheme == "http":  # a plain-http server (https is the default and needs nothing)
            return from_url(root, client_options={"allow_http": True})
        return from_url(root)
    except Exception as err:  # a bad configuration: say which bucket it was for
        raise InputError(f"{url}: cannot set up {SCHEMES[scheme]} access ({err})") from err


def expand_remote(spec: str) -> list[RemoteFile]:
    """The objects `spec` names (a URL, or a glob in its key: `*`, `?`, `[...]`, `**`), in key
    order; InputError naming the bucket and key when none matches, an object is missing or
    access is denied."""
    scheme, bucket, key = _split(spec)
    store = _store(spec, scheme, bucket)
    if not _GLOB.search(key):
        return [_head(spec, bucket, key, store)]
    if scheme in ("http", "https"):
        raise InputError(f"{spec}: an HTTP server cannot be listed; name each file")
    prefix = key[: _GLOB.search(key).start()].rpartition("/")[0]  # type: ignore[union-attr]
    pattern = glob_regex(key)
    found = [meta for meta in _listing(spec, bucket, prefix, store) if pattern.match(meta["path"])]
    if not found:
        raise InputError(f"{spec}: no object matches this pattern (bucket {bucket!r})")
    found.sort(key=lambda m: m["path"])
    return [_remote_file(spec, scheme, bucket, meta, store) for meta in found]


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regular expression for a glob over object keys: `*` and `?` stay inside one folder,
    `**/` spans any number of them, `[...]` is a set of characters."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out) + r"\Z")


def _listing(spec: str, bucket: str, prefix: str, store: Any) -> list[Any]:
    import obstore

    found: list[Any] = []
    with object_errors((spec, bucket, prefix + "/" if prefix else "")):
        for batch in obstore.list(store, prefix=prefix or None):
            found.extend(batch)
    return found


def _head(spec: str, bucket: str, key: str, store: Any) -> RemoteFile:
    import obstore

    if not key or key.endswith("/"):
        raise InputError(f"{spec}: names a folder, not an object; give a key or a glob")
    with object_errors((spec, bucket, key)):
        meta = obstore.head(store, key)
    scheme = urlsplit(spec).scheme.lower()
    return _remote_file(spec, scheme, bucket, meta, store)


def _remote_file(spec: str, scheme: str, bucket: str, meta: Any, store: Any) -> RemoteFile:
    key = str(meta["path"])
    parts = urlsplit(spec)
    url = (
        f"{bucket}/{key}"
        if scheme in ("http", "https")
        else f"{parts.scheme}://{parts.netloc}/{key}"
    )
    return RemoteFile(
        url=url,
        bucket=bucket,
        key=key,
        size=int(meta["size"]),
        etag=meta.get("e_tag"),
        modified=meta.get("last_modified"),
        store=store,
    )


def polars_source(path: object) -> Any:
    """What polars' scans take for `path`: the URL of a RemoteFile (polars reads it with its
    own cloud reader and the same environment variables), the path itself otherwise."""
    return path.url if isinstance(path, RemoteFile) else path
