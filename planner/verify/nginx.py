"""nginx as a streaming-safe LLM load balancer: `capplan lb`, verify's tests and guide.

`nginx_balancer(upstreams)` writes a config into a temporary folder (pid, logs and temp
paths there, `daemon off;`), runs Debian's nginx as a child process on a loopback port and
yields its URL. nginx dies with its parent: it is stopped when the context exits (Ctrl-C and
SIGTERM included, see `serve`) and, on Linux, sent SIGTERM by the kernel when the launcher
itself is killed (PR_SET_PDEATHSIG), so no orphan keeps the port. The config streams as an
LLM gateway must: `proxy_buffering off` (else nginx holds SSE chunks back and TTFT is
measured at nginx's buffer flush), HTTP/1.1 with keep-alive to the upstreams, and read/send
timeouts far above the worst TTFT (else queued requests come back as 504). Routing is
nginx's default round-robin, or `least_conn`. `max_fails=0` turns off the passive health
check that would eject a slow replica silently; `passive_check=True` keeps nginx's default
(1 failure in 10 s ejects it for 10 s).

`capplan lb --port 8080 http://127.0.0.1:8001 http://127.0.0.1:8002` waits until the
upstreams answer, then runs one in the foreground until Ctrl-C or SIGTERM;
`capplan lb --print-config ...` writes the config for a user's own nginx.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from contracts.errors import ConfigError, RunError, TargetError

NGINX = "nginx"


def nginx_binary() -> str | None:
    """The nginx executable (PATH, else /usr/sbin/nginx), or None when not installed."""
    found = shutil.which(NGINX)
    if found:
        return found
    return "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nginx_config(
    folder: Path,
    port: int,
    upstreams: Sequence[str],
    *,
    least_conn: bool = False,
    passive_check: bool = False,
    timeout_s: float = 600.0,
    bind: str = "127.0.0.1",
) -> str:
    """The nginx.conf text: one upstream block over `upstreams` (base URLs) on `bind`:`port`,
    its temporary files, pid and logs under `folder`."""
    servers = "\n".join(
        f"        server {u.split('://', 1)[1].rstrip('/')}"
        + ("" if passive_check else " max_fails=0")
        + ";"
        for u in upstreams
    )
    return f"""worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    upstream llm {{
{"        least_conn;" if least_conn else ""}
{servers}
        keepalive 64;
    }}
    server {{
        listen {bind}:{port};
        client_max_body_size 64m;
        location / {{
            proxy_pass http://llm;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_cache off;
            proxy_request_buffering off;
            proxy_read_timeout {timeout_s:.0f}s;
            proxy_send_timeout {timeout_s:.0f}s;
            proxy_connect_timeout 5s;
        }}
    }}
}}
"""


@contextlib.contextmanager
def nginx_balancer(
    upstreams: Sequence[str],
    *,
    least_conn: bool = False,
    passive_check: bool = False,
    port: int = 0,
    bind: str = "127.0.0.1",
    startup_timeout_s: float = 20.0,
) -> Iterator[str]:
    """nginx balancing `upstreams` (base URLs) on `bind`:`port` (0: a free port); yields its
    base URL. Raises ConfigError (exit 2) when nginx is not installed or the port is taken,
    RunError when nginx does not start."""
    binary = nginx_binary()
    if binary is None:
        raise ConfigError(
            "nginx is not installed: install Debian's nginx package (apt-get install nginx; "
            "scripts/test.sh does), or run `capplan lb --print-config` into your own nginx"
        )
    with tempfile.TemporaryDirectory(prefix="capplan-nginx-") as tmp:
        folder = Path(tmp)
        port = port or free_port()
        if _listening(bind, port):
            raise ConfigError(f"--port {port}: {bind}:{port} is already in use")
        conf = folder / "nginx.conf"
        conf.write_text(
            nginx_config(
                folder, port, upstreams, least_conn=least_conn, passive_check=passive_check,
                bind=bind,
            )
        )  # fmt: skip
        proc = subprocess.Popen(
            [binary, "-c", str(conf), "-p", str(folder), "-e", str(folder / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (a single prctl call, no locks)
        )
        url = f"http://{bind}:{port}"
        try:
            _wait_listening(proc, bind, port, startup_timeout_s, folder)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _die_with_parent() -> None:
    """In nginx's child before exec: have the kernel send it SIGTERM when its parent dies
    (Linux PR_SET_PDEATHSIG; elsewhere nothing), so a killed launcher leaves no nginx."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _listening(host: str, port: int) -> bool:
    """Something accepts TCP connections at host:port (False also for a name that does not
    resolve: to a user, an instance that is not there yet)."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _wait_listening(
    proc: subprocess.Popen[bytes], host: str, port: int, timeout_s: float, folder: Path
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            log = (folder / "error.log").read_text() if (folder / "error.log").exists() else ""
            raise RunError(f"nginx exited with {proc.returncode}: {err}{log}".strip())
        if _listening(host, port):
            return
        time.sleep(0.05)
    raise RunError(f"nginx did not listen on {host}:{port} within {timeout_s:g} s")


def wait_for_upstreams(upstreams: Sequence[str], timeout_s: float) -> None:
    """Return once every upstream accepts a TCP connection (servers just started); raise
    TargetError naming those that did not within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    waiting = list(upstreams)
    while True:
        waiting = [u for u in waiting if not _listening(*_host_port(u))]
        if not waiting:
            return
        if time.monotonic() >= deadline:
            raise TargetError(
                f"{', '.join(waiting)}: not answering after {timeout_s:g} s (start the "
                "instances first, or raise --wait-timeout)"
            )
        time.sleep(0.2)


def _host_port(url: str) -> tuple[str, int]:
    """(host, port) of a base URL such as http://127.0.0.1:8001 (port 80/443 by default)."""
    scheme, _, rest = url.partition("://")
    netloc = rest.split("/", 1)[0]
    host, _, port = netloc.rpartition(":")
    if not host or not port.isdigit():
        return netloc, 443 if scheme == "https" else 80
    return host.strip("[]"), int(port)


def check_upstreams(upstreams: Sequence[str]) -> list[str]:
    """The upstreams as base URLs without a trailing slash; ConfigError (exit 2) for one that
    is not an http://HOST:PORT URL or a duplicate."""
    out: list[str] = []
    for url in upstreams:
        base = url.rstrip("/")
        if not base.startswith("http://") or base.count("/") != 2:
            raise ConfigError(f"upstream {url!r}: expected a base URL such as http://HOST:PORT")
        if base in out:
            raise ConfigError(f"upstream {url!r} is listed twice")
        out.append(base)
    if not out:
        raise ConfigError("give at least one upstream URL")
    return out


class LbOptions(BaseModel):
    """What `capplan lb` was asked: each option's bound and default declared once here (the
    CLI builds it with build_options; an upstream that is not a base URL, or twice, is
    refused in check_upstreams' words)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    port: int = Field(default=8080, ge=1, le=65535, description="port nginx listens on")
    upstreams: tuple[str, ...] = Field(description="the instances' base URLs")
    bind: str = Field(default="127.0.0.1", description="address nginx listens on")
    least_conn: bool = Field(default=False, description="least_conn instead of round-robin")
    passive_check: bool = Field(default=False, description="keep nginx's passive check")
    wait_s: float = Field(default=60.0, ge=0, description="longest wait for the upstreams")
    print_config: bool = Field(default=False, description="print nginx.conf instead")
    folder: str = Field(
        default="/tmp/capplan-lb", description="the printed config's pid, logs and temp files"
    )

    @field_validator("upstreams", mode="after")
    @classmethod
    def _base_urls(cls, upstreams: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_upstreams(upstreams))

    def config_text(self) -> str:
        """The nginx.conf of --print-config."""
        return nginx_config(
            Path(self.folder), self.port, self.upstreams, least_conn=self.least_conn,
            passive_check=self.passive_check, bind=self.bind,
        )  # fmt: skip

    def balancer(self) -> dict[str, Any]:
        """`nginx_balancer`'s (and `serve`'s) keyword arguments."""
        return {
            "upstreams": list(self.upstreams),
            "least_conn": self.least_conn,
            "passive_check": self.passive_check,
            "port": self.port,
            "bind": self.bind,
        }


def serve(url_ready: Callable[[str], None], **balancer: Any) -> None:
    """Run `nginx_balancer(**balancer)` until SIGINT or SIGTERM, calling `url_ready(url)` once
    it listens; nginx is stopped before this returns (a SIGTERM ends it as Ctrl-C does)."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with contextlib.suppress(KeyboardInterrupt), nginx_balancer(**balancer) as url:
            url_ready(url)
            while True:
                time.sleep(3600)
    finally:
        signal.signal(signal.SIGTERM, previous)
