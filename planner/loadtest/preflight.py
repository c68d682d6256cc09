"""Before load reaches a target: the preflight, and after it, the verdict on the run's errors.

`preflight` checks, in a few seconds and with one request, what would otherwise show only as
a run in which every request failed: the base URL is an http(s) URL, the endpoint answers,
`/v1/models` lists the model (with no model given, the first one it serves is taken, as
guidellm does; a server without `/v1/models` is let through to the next check), and one
request streams content. Each failure is one line naming what to fix (PreflightError,
exit 2). `failed_run` reads a finished run's stage summaries: with no successful request at
all, or failures above a stated share, it says so by error class (FailedRunError, exit 3).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from contracts.errors import FailedRunError, PreflightError
from contracts.latency import CENSORED_CLASSES
from contracts.run import StageSummary
from locustfiles.openai_stream import (
    MESSAGE_CHARS,
    PATHS,
    Endpoint,
    StreamResult,
    error_body_message,
    read_stream,
)

CONNECT_TIMEOUT_S = 10.0
PREFLIGHT_TOKENS = 4


@dataclass(frozen=True, kw_only=True)
class PreflightResult:
    """What the preflight found: the model to send and how long the test request took."""

    model: str
    served_models: tuple[str, ...] | None  # None: the target has no /v1/models
    model_from_target: bool  # no model was given: `model` is the first one served
    ttft_s: float


def check_base_url(host: str) -> str:
    """`host` without a trailing slash; raises PreflightError unless it is an http(s) URL."""
    parts = urlsplit(host)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise PreflightError(
            f"--host {host!r}: expected a base URL with its scheme, e.g. http://{host or 'HOST'}"
            if "://" not in host
            else f"--host {host!r}: expected an http:// or https:// URL"
        )
    return host.rstrip("/")


def preflight(
    host: str,
    model: str | None,
    endpoint: Endpoint,
    *,
    api_key: str | None = None,
    timeout_s: float = 60.0,
) -> PreflightResult:
    """Check that `host` serves `model` and streams one short answer; returns what it found.

    Raises PreflightError (exit 2) with one line: a bad URL, a target that does not answer,
    a model it does not list (the message lists the ones it does), or a test request that
    fails or streams nothing. `timeout_s` bounds the test request (a cold server may be slow).
    """
    base = check_base_url(host)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    served = _served_models(base, headers)
    if model is None:
        if not served:
            raise PreflightError(
                f"{base}/v1/models lists no model to send: give --model"
                if served is not None
                else f"{base} has no /v1/models to take the model from: give --model"
            )
        chosen = served[0]
    else:
        if served is not None and model not in served:
            raise PreflightError(
                f"--model {model!r}: {base} serves {', '.join(served) or 'no model'}"
            )
        chosen = model
    ttft_s = first_token_s(base, chosen, endpoint, headers, timeout_s)
    return PreflightResult(
        model=chosen, served_models=served, model_from_target=model is None, ttft_s=ttft_s
    )


def _http_message(err: urllib.error.HTTPError) -> str:
    """An HTTP error's message on one line, truncated (a server may answer with a page)."""
    text = " ".join((error_body_message(err.read()) or str(err.reason)).split())
    return text[:MESSAGE_CHARS]


def _unreachable(base: str, err: BaseException) -> PreflightError:
    reason = getattr(err, "reason", err)
    return PreflightError(f"--host {base}: the target does not answer ({reason})")


def _served_models(base: str, headers: dict[str, str]) -> tuple[str, ...] | None:
    """The ids /v1/models lists, or None when the target has no such route (404/405)."""
    request = urllib.request.Request(base + "/v1/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=CONNECT_TIMEOUT_S) as resp:
            body = resp.read()
    except urllib.error.HTTPError as err:
        if err.code in (404, 405):
            return None
        raise PreflightError(
            f"{base}/v1/models answered HTTP {err.code}: {_http_message(err)}"
        ) from err
    except (urllib.error.URLError, OSError) as err:
        raise _unreachable(base, err) from err
    try:
        data = json.loads(body)
        return tuple(str(m["id"]) for m in data["data"])
    except (ValueError, KeyError, TypeError) as err:
        raise PreflightError(f"{base}/v1/models: not an OpenAI model list") from err


def first_token_s(
    base: str,
    model: str,
    endpoint: Endpoint,
    headers: dict[str, str],
    timeout_s: float,
    max_tokens: int = PREFLIGHT_TOKENS,
    *,
    first_only: bool = False,
) -> float:
    """Stream one short answer; returns its time to first content, or raises PreflightError.
    `first_only`: hang up after the first content (a server that streams past `max_tokens`,
    or a long answer, costs no more than its first token)."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": True}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": "Say hello."}]
    else:
        body["prompt"] = "Say hello."
    request = urllib.request.Request(
        base + PATHS[endpoint],
        data=json.dumps(body).encode(),
        headers={**headers, "Content-Type": "application/json"},
    )
    sent = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            result = StreamResult()
            readline = resp.readline
            if first_only:

                def readline() -> bytes:
                    return b"" if result.first_token_t is not None else resp.readline()

            read_stream(readline, time.perf_counter, endpoint, into=result)
    except urllib.error.HTTPError as err:
        message = _http_message(err)
        raise PreflightError(
            f"test request to {base}{PATHS[endpoint]} (model {model!r}) answered "
            f"HTTP {err.code}: {message}"
        ) from err
    except (TimeoutError, urllib.error.URLError, OSError) as err:
        raise _unreachable(base, err) from err
    if result.error_class is not None or result.first_token_t is None:
        raise PreflightError(
            f"test request to {base}{PATHS[endpoint]} (model {model!r}) streamed no content "
            f"({result.error_class}{': ' + result.error_message if result.error_message else ''})"
        )
    return result.first_token_t - sent


def _by_class(stages: list[StageSummary]) -> Counter[str]:
    by_class: Counter[str] = Counter()
    for s in stages:
        by_class.update(s.errors_by_class)
    return by_class


def _cancelled(stages: list[StageSummary]) -> int:
    """Requests still in flight when their stage ended (CENSORED_CLASSES): not failures, as
    the limit search and the report count them."""
    return sum(n for s in stages for c, n in s.errors_by_class.items() if c in CENSORED_CLASSES)


def error_line(stages: Iterable[StageSummary]) -> str | None:
    """`N of M requests failed (class: n, ...)` and `K still in flight when their stage ended
    (cancelled, not failures)`, or None when none failed and none was cancelled."""
    stages = list(stages)
    by_class = _by_class(stages)
    failed = Counter({c: n for c, n in by_class.items() if c not in CENSORED_CLASSES})
    cancelled = _cancelled(stages)
    scheduled = sum(s.scheduled for s in stages)
    parts = []
    if failed:
        classes = ", ".join(f"{cls}: {n}" for cls, n in failed.most_common())
        parts.append(f"{sum(failed.values())} of {scheduled} requests failed ({classes})")
    if cancelled:
        parts.append(
            f"{cancelled} of {scheduled} still in flight when their stage ended (cancelled, "
            "not failures)"
        )
    return "; ".join(parts) or None


def failed_run(
    stages: Iterable[StageSummary], max_error_share: float | None = None
) -> FailedRunError | None:
    """The error to end a run with when no request of it succeeded, or when failed requests
    are more than `max_error_share` of the scheduled ones (when given); else None.

    Its message is a summary by error class (most frequent first) with each class's first
    message, for stderr; the run directory is written either way.
    """
    stages = list(stages)
    scheduled = sum(s.scheduled for s in stages)
    if scheduled == 0:
        return None
    if any(s.completed for s in stages):
        line = error_line(stages)
        failed = sum(s.errors for s in stages) - _cancelled(stages)
        if max_error_share is None or line is None or failed <= max_error_share * scheduled:
            return None
        return FailedRunError(f"{line}: more than --max-errors {max_error_share:.3g}")
    messages: dict[str, str] = {}
    for s in stages:
        for cls, message in s.error_messages.items():
            messages.setdefault(cls, message)
    failed = sum(s.errors for s in stages)
    return nothing_succeeded("", scheduled, failed, _by_class(stages), messages)


def nothing_succeeded(
    where: str,
    scheduled: int,
    failed: int,
    by_class: Mapping[str, int],
    messages: Mapping[str, str],
) -> FailedRunError:
    """`no request succeeded[ where]: N scheduled, 0 completed`, then a line per error class
    (most frequent first, with its first message when known), one for failures without a
    class and one for requests still running when the window closed."""
    lines = [f"no request succeeded{where}: {scheduled} scheduled, 0 completed"]
    for cls, n in Counter(by_class).most_common():
        lines.append(f"  {cls}: {n}" + (f"  ({messages[cls]})" if cls in messages else ""))
    if failed > sum(by_class.values()):
        lines.append(f"  without an error class: {failed - sum(by_class.values())}")
    if scheduled > failed:
        lines.append(f"  still running when the window closed: {scheduled - failed}")
    return FailedRunError("\n".join(lines))


class Target(Protocol):
    """What the preflight reads of a load test's or a limit search's options."""

    @property
    def host(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def endpoint(self) -> Endpoint: ...
    @property
    def api_key_env(self) -> str | None: ...


def checked_model(target: Target, echo: Callable[[str], None]) -> str:
    """The model to load `target.host` with, after the preflight (an empty `target.model`:
    the first one served); says what it found through `echo`.

    Raises PreflightError as `preflight` does (the API key is read from `api_key_env`).
    """
    api_key = os.environ.get(target.api_key_env) if target.api_key_env else None
    found = preflight(target.host, target.model or None, target.endpoint, api_key=api_key)
    taken = " (taken from /v1/models: no --model given)" if found.model_from_target else ""
    echo(
        f"preflight: {target.host} streams model {found.model!r}{taken}, "
        f"first token in {found.ttft_s:.2f} s"
    )
    return found.model
