"""Test hosts as Linux network namespaces: each its own loopback and one address on a bridge.

`HostNetwork` creates (as root, with iproute2's `ip`) a hub namespace holding a bridge and,
per host, a namespace whose `eth0` (one end of a veth pair, the other on the bridge) has
`10.200.0.N/24`. Nothing is routed anywhere else: the namespaces reach only each other, and no
host shares a loopback with another or with the test. `run` starts a process inside a host
(`ip netns exec`, in its own session so that killing it kills its children); `close` kills
what was started and deletes every namespace, also after a failure half way through setup.
Creating a namespace that fails raises RuntimeError: a test that needs hosts fails, never
skips, where they cannot be made.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

SUBNET = "10.200.0"  # private, and only ever inside the namespaces created here


def _ip(*args: str) -> None:
    """Run `ip *args`; raise RuntimeError with its message when it fails."""
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")


@dataclass
class HostNetwork:
    """Hosts `names` on one bridge; `address[name]` is each one's IPv4 address."""

    names: tuple[str, ...]
    prefix: str = field(default_factory=lambda: f"cpl{os.getpid()}")
    address: dict[str, str] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def ns(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def _add_ns(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self.created.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    def open(self) -> HostNetwork:
        """Create the hub, its bridge and every host. Raises RuntimeError (after removing
        what it made) when a namespace or link cannot be created."""
        try:
            hub = self.ns("hub")
            self._add_ns(hub)
            _ip("-n", hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", hub, "link", "set", "br0", "up")
            for n, name in enumerate(self.names, start=1):
                ns, port = self.ns(name), f"p{n}"
                self._add_ns(ns)
                _ip("link", "add", port, "netns", hub, "type", "veth", "peer", "eth0", "netns", ns)
                _ip("-n", hub, "link", "set", port, "master", "br0", "up")
                self.address[name] = f"{SUBNET}.{n}"
                _ip("-n", ns, "addr", "add", f"{self.address[name]}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
        except BaseException:
            self.close()
            raise
        return self

    def run(self, name: str, args: list[str], **popen: object) -> subprocess.Popen[bytes]:
        """Start `args` inside host `name` (its own session); killed by `close`."""
        cmd = ["ip", "netns", "exec", self.ns(name), *args]
        proc = subprocess.Popen(cmd, start_new_session=True, **popen)  # type: ignore[call-overload]
        self.started.append(proc)
        return proc  # type: ignore[no-any-return]

    def wait_listening(self, client: str, server: str, port: int, deadline_s: float) -> None:
        """Poll from host `client` until host `server` accepts TCP on `port`; RuntimeError if
        it does not by `deadline_s`."""
        code = (
            "import socket, sys\n"
            f"socket.create_connection(({self.address[server]!r}, {port}), timeout=1).close()"
        )
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            cmd = ["ip", "netns", "exec", self.ns(client), sys.executable, "-c", code]
            if subprocess.run(cmd, capture_output=True, check=False).returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError(f"{server} did not listen on port {port} within {deadline_s:g} s")

    def close(self) -> None:
        """Kill every started process group, then delete every namespace created."""
        for proc in self.started:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        errors = []
        for ns in reversed(self.created):
            done = subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
            if done.returncode != 0:
                errors.append(f"{ns}: {done.stderr.decode().strip()}")
        self.created.clear()
        if errors:
            raise RuntimeError("could not delete namespaces: " + "; ".join(errors))
