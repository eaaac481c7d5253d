"""``query_promql``: a PromQL query against the configured Prometheus (HTTP API v1).

The server is the config key ``prometheus.url`` (``ONGRID_PROMETHEUS_URL``), e.g.
``http://prometheus:9090`` or a prefix such as ``http://host/prometheus``; anything speaking the
Prometheus query API (Thanos, Cortex/Mimir, VictoriaMetrics) works. An instant query goes to
``/api/v1/query``; with ``range_seconds`` it becomes a range query (``/api/v1/query_range``)
ending at ``time`` (default now). Queries are read-only by nature.

The connection goes through the guarded transport (:mod:`ongrid_skills.builtins.transport`):
a ``prometheus.url`` on a link-local or metadata address, or outside ``builtin_net_allow``, is
refused (``forbidden_target``) like any probe target.

No environment proxies (``trust_env=False``); the whole call stays within ``timeout_ms`` (also
passed to Prometheus as its query ``timeout``); the answer is read up to
:data:`MAX_RESPONSE_BYTES` — a query that returns more must be narrowed.
"""

from __future__ import annotations

import asyncio
import json
import math
import time as _time
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

import httpx
from pydantic import Field

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure
from ongrid_skills.builtins.http import USER_AGENT, check_url, elapsed_ms
from ongrid_skills.builtins.transport import guarded_client

__all__ = ["query_promql"]

CONFIG_KEY = "prometheus.url"
MAX_QUERY_CHARS = 20000
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
MAX_RANGE_SECONDS = 366 * 86400
MAX_POINTS = 11000  # Prometheus refuses more points per series
AUTO_POINTS = 250  # step chosen when none is given: about this many points
MAX_GET_URL = 4000  # longer queries are POSTed as a form, as the API allows


def _parse_time(value: float | str) -> float:
    """Unix seconds from a number, a numeric string, ``now`` or an RFC 3339 timestamp."""
    if isinstance(value, bool):
        raise BuiltinFailure("time must be unix seconds or an RFC 3339 timestamp")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip()
        if text.lower() == "now":
            return _time.time()
        try:
            seconds = float(text)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError:
                raise BuiltinFailure(
                    f"time {value!r} is neither unix seconds nor an RFC 3339 timestamp"
                ) from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            seconds = parsed.timestamp()
    if not math.isfinite(seconds) or seconds < 0:
        raise BuiltinFailure(f"time {value!r} is out of range")
    return seconds


def _fmt(seconds: float) -> str:
    return f"{seconds:.3f}".rstrip("0").rstrip(".")


async def _read_capped(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise BuiltinFailure(
                f"Prometheus answer is larger than {MAX_RESPONSE_BYTES} bytes: narrow the query "
                "(fewer series, shorter range or larger step)"
            )
        chunks.append(chunk)
    return b"".join(chunks)


async def query_promql(
    ctx: BuiltinContext,
    query: Annotated[
        str,
        Field(
            description="PromQL expression, e.g. 'up' or 'rate(http_requests_total[5m])'.",
            min_length=1,
            max_length=MAX_QUERY_CHARS,
        ),
    ],
    time: Annotated[
        float | str | None,
        Field(
            description="Evaluation time (instant) or end of the range: unix seconds or RFC 3339; "
            "default now."
        ),
    ] = None,
    range_seconds: Annotated[
        int | None,
        Field(
            description="Make it a range query over the last N seconds before `time`.",
            ge=1,
            le=MAX_RANGE_SECONDS,
        ),
    ] = None,
    step_seconds: Annotated[
        int | None,
        Field(
            description=f"Resolution of a range query; default about {AUTO_POINTS} points.",
            ge=1,
            le=86400,
        ),
    ] = None,
    timeout_ms: Annotated[
        int, Field(description="Budget for the whole query, in ms.", ge=100, le=120000)
    ] = 10000,
) -> dict[str, Any]:
    """Evaluate ``query`` (instant, or over a range) and return Prometheus' ``data``."""
    raw_base = ctx.config.get(CONFIG_KEY)
    if not raw_base or not raw_base.strip():
        raise BuiltinFailure(f"config key {CONFIG_KEY} is not set")
    base = str(check_url(raw_base, CONFIG_KEY)).rstrip("/")
    if not query.strip():
        raise BuiltinFailure("query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise BuiltinFailure(f"query is longer than {MAX_QUERY_CHARS} characters")
    if not 100 <= timeout_ms <= 120000:
        raise BuiltinFailure("timeout_ms must be within 100..120000")

    params: dict[str, str] = {"query": query, "timeout": f"{max(timeout_ms // 1000, 1)}s"}
    extra: dict[str, Any] = {}
    if range_seconds is not None:
        if not 1 <= range_seconds <= MAX_RANGE_SECONDS:
            raise BuiltinFailure(f"range_seconds must be within 1..{MAX_RANGE_SECONDS}")
        end = _parse_time(time) if time is not None else _time.time()
        step = step_seconds or max(1, math.ceil(range_seconds / AUTO_POINTS))
        if not 1 <= step <= 86400:
            raise BuiltinFailure("step_seconds must be within 1..86400")
        if range_seconds / step > MAX_POINTS:
            raise BuiltinFailure(
                f"{range_seconds} s at a {step} s step is more than {MAX_POINTS} points per "
                "series: use a larger step_seconds"
            )
        start = end - range_seconds
        params |= {"start": _fmt(start), "end": _fmt(end), "step": str(step)}
        extra = {"start": params["start"], "end": params["end"], "step_seconds": step}
        endpoint = f"{base}/api/v1/query_range"
    else:
        if step_seconds is not None:
            raise BuiltinFailure("step_seconds needs range_seconds (a range query)")
        if time is not None:
            params["time"] = _fmt(_parse_time(time))
            extra = {"time": params["time"]}
        endpoint = f"{base}/api/v1/query"

    started = _time.monotonic()
    budget = timeout_ms / 1000
    try:
        async with (
            asyncio.timeout(budget),
            guarded_client(
                ctx.reach.net,
                follow_redirects=False,
                timeout=httpx.Timeout(budget),
                headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            ) as client,
        ):
            encoded = urlencode(params)
            if len(endpoint) + len(encoded) + 1 <= MAX_GET_URL:
                request = client.build_request("GET", f"{endpoint}?{encoded}")
            else:
                request = client.build_request(
                    "POST",
                    endpoint,
                    content=encoded.encode(),
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                )
            response = await client.send(request, stream=True)
            try:
                body = await _read_capped(response)
            finally:
                await response.aclose()
    except TimeoutError:
        raise BuiltinFailure(f"Prometheus did not answer within {timeout_ms} ms") from None
    except httpx.TimeoutException:
        raise BuiltinFailure(f"Prometheus did not answer within {timeout_ms} ms") from None
    except httpx.ConnectError as exc:
        raise BuiltinFailure(f"cannot connect to Prometheus at {base}: {exc}") from None
    except httpx.HTTPError as exc:
        raise BuiltinFailure(f"Prometheus request failed: {type(exc).__name__}: {exc}") from None

    status = response.status_code
    try:
        payload = json.loads(body)
    except ValueError:
        excerpt = body[:300].decode("utf-8", "replace").strip()
        raise BuiltinFailure(
            f"Prometheus answered HTTP {status} without a JSON body: {excerpt!r}"
        ) from None
    if not isinstance(payload, dict):
        raise BuiltinFailure(f"Prometheus answered HTTP {status} with an unexpected JSON value")
    if payload.get("status") != "success":
        error = payload.get("error") or f"HTTP {status}"
        error_type = payload.get("errorType")
        prefix = f"Prometheus error ({error_type})" if error_type else "Prometheus error"
        raise BuiltinFailure(f"{prefix}: {error}")
    data = payload.get("data")
    if not isinstance(data, dict) or "resultType" not in data or "result" not in data:
        raise BuiltinFailure("Prometheus answered success without data.resultType/result")

    result: dict[str, Any] = {
        "query": query,
        "resultType": data["resultType"],
        "result": data["result"],
        "elapsed_ms": elapsed_ms(started),
        **extra,
    }
    if isinstance(data["result"], list):
        result["series"] = len(data["result"])
    for key in ("warnings", "infos"):
        if payload.get(key):
            result[key] = payload[key]
    ctx.log(f"query_promql: {data['resultType']} in {result['elapsed_ms']} ms")
    return result
