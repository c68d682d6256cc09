"""A static file server on loopback that answers HTTP Range requests (as object stores and CDNs
do; the standard library's SimpleHTTPRequestHandler ignores them), for the https:// readers."""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


class _RangeHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def send_head(self) -> io.BytesIO | None:  # type: ignore[override]
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return None
        data = path.read_bytes()
        m = _RANGE.match(self.headers.get("Range", ""))
        if m and (m[1] or m[2]):
            start = int(m[1]) if m[1] else max(len(data) - int(m[2]), 0)
            end = int(m[2]) if m[1] and m[2] else len(data) - 1
            end = min(end, len(data) - 1)
            body = data[start : end + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        else:
            body = data
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Last-Modified", self.date_time_string(int(path.stat().st_mtime)))
        self.end_headers()
        return io.BytesIO(body)


@contextmanager
def range_server(folder: Path) -> Iterator[str]:
    """Serve `folder` on a free 127.0.0.1 port; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_RangeHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
