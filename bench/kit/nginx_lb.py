"""A real nginx load balancer in front of test servers, for `capplan verify`'s tests and docs.

`nginx_balancer(upstreams)` writes a config into a temporary folder (pid, logs and temp
paths there, `daemon off;`), runs Debian's nginx as a child process on a free loopback port
and yields its URL. The config streams as an LLM gateway must: `proxy_buffering off` (else
nginx holds SSE chunks back and TTFT is measured at nginx's buffer flush), HTTP/1.1 with
keep-alive to the upstreams, and read/send timeouts far above the worst TTFT (else queued
requests come back as 504). Routing is nginx's default round-robin, or `least_conn`.
`max_fails=0` turns off the passive health check that would eject a slow replica silently;
`passive_check=True` keeps nginx's default (1 failure in 10 s ejects it for 10 s).

`python -m bench.kit.nginx_lb --port 8080 http://127.0.0.1:8001 http://127.0.0.1:8002` runs
one in the foreground until Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

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
) -> str:
    """The nginx.conf text: one upstream block over `upstreams` (base URLs) on `port`."""
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
        listen 127.0.0.1:{port};
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
    startup_timeout_s: float = 20.0,
) -> Iterator[str]:
    """nginx balancing `upstreams` (base URLs); yields its base URL. Raises RuntimeError
    when nginx is not installed or does not start."""
    binary = nginx_binary()
    if binary is None:
        raise RuntimeError("nginx is not installed (Debian: apt-get install nginx)")
    with tempfile.TemporaryDirectory(prefix="capplan-nginx-") as tmp:
        folder = Path(tmp)
        port = port or free_port()
        conf = folder / "nginx.conf"
        conf.write_text(
            nginx_config(
                folder, port, upstreams, least_conn=least_conn, passive_check=passive_check
            )
        )
        proc = subprocess.Popen(
            [binary, "-c", str(conf), "-p", str(folder), "-e", str(folder / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_listening(proc, port, startup_timeout_s, folder)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_listening(
    proc: subprocess.Popen[bytes], port: int, timeout_s: float, folder: Path
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            log = (folder / "error.log").read_text() if (folder / "error.log").exists() else ""
            raise RuntimeError(f"nginx exited with {proc.returncode}: {err}{log}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nginx did not listen on 127.0.0.1:{port} within {timeout_s:g} s")


def main() -> None:
    parser = argparse.ArgumentParser(description="nginx in front of OpenAI-compatible servers")
    parser.add_argument("upstreams", nargs="+", help="base URLs, e.g. http://127.0.0.1:8001")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--least-conn", action="store_true")
    parser.add_argument("--passive-check", action="store_true", help="nginx's default ejection")
    args = parser.parse_args()
    with nginx_balancer(
        args.upstreams, least_conn=args.least_conn, passive_check=args.passive_check, port=args.port
    ) as url:
        print(f"nginx balancing {len(args.upstreams)} upstream(s) at {url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
