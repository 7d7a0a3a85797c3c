"""HTTP load: ``wrk`` pinned to its own core, or a small Trio client when ``wrk`` is not installed; and an
open-loop load at a fixed rate.

A load is a list of requests that every connection cycles through (keep-alive, closed loop: each connection sends
its next request as soon as the previous answer arrives). Both generators report requests/s, p50/p99 latency and
how many answers were not 2xx, so a scenario can refuse a run whose requests failed.

:func:`open_loop` offers requests at a fixed rate whatever the answers do: request ``i`` is due at ``i / rate``
seconds, and its latency counts from then, so time spent queued behind slow answers counts too (a closed loop
would send less instead and hide it).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import h11
import trio

from bench.stats import percentile

__all__ = ["LoadResult", "Request", "load", "open_loop", "wrk_available"]


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None

    @classmethod
    def make(cls, method: str, path: str, token: str | None = None, body: object = None) -> Request:
        headers: list[tuple[str, str]] = []
        if token is not None:
            headers.append(("zt-session", token))
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers.append(("content-type", "application/json"))
        return cls(method, path, tuple(headers), data)


@dataclass(frozen=True, slots=True)
class LoadResult:
    """One load run. Latencies in milliseconds."""

    generator: str
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    failed: int
    statuses: dict[int, int] = field(default_factory=dict)


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def load(base_url: str, requests: Sequence[Request], *, connections: int, seconds: float,
         cpu: int | None = None, prefer_wrk: bool = True) -> LoadResult:
    """Run a closed-loop load against ``base_url`` (``http://host:port``) for ``seconds``."""
    if prefer_wrk and wrk_available():
        return _wrk(base_url, requests, connections, seconds, cpu)
    return trio.run(_python_load, base_url, requests, connections, seconds)


# wrk ---------------------------------------------------------------------------------------------------------

# Requests are formatted in init(), once wrk knows the Host header to add; at load time it does not yet.
_LUA_HEAD = """
local specs = {}
local reqs = {}
local function add(method, path, headers, body) specs[#specs + 1] = {method, path, headers, body} end
"""
_LUA_TAIL = """
init = function(args)
  for _, s in ipairs(specs) do reqs[#reqs + 1] = wrk.format(s[1], s[2], s[3], s[4]) end
end
local i = 0
request = function()
  i = i + 1
  if i > #reqs then i = 1 end
  return reqs[i]
end
"""


def _lua_string(value: str | bytes) -> str:
    text = value.decode() if isinstance(value, bytes) else value
    return "[==[" + text + "]==]"


def _lua_script(requests: Sequence[Request]) -> str:
    lines = [_LUA_HEAD]
    # One function per 500 requests: a Lua function holds at most 2^16 constants.
    for start in range(0, len(requests), 500):
        lines.append("do local chunk = function()")
        for r in requests[start:start + 500]:
            headers = "{" + ", ".join(f"[ {_lua_string(k)} ] = {_lua_string(v)}" for k, v in r.headers) + "}"
            body = _lua_string(r.body) if r.body is not None else "nil"
            lines.append(f"add({_lua_string(r.method)}, {_lua_string(r.path)}, {headers}, {body})")
        lines.append("end chunk() end")
    lines.append(_LUA_TAIL)
    return "\n".join(lines)


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not match:
        return math.nan
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_wrk(output: str) -> LoadResult:
    """Requests/s, p50/p99 and the non-2xx count from ``wrk --latency`` output."""
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    total = re.search(r"(\d+) requests in ([\d.]+)(\w+)", output)
    requests = int(total.group(1)) if total else 0
    seconds = _ms(total.group(2) + total.group(3)) / 1e3 if total else math.nan
    p50 = re.search(r"\s50%\s+(\S+)", output)
    p99 = re.search(r"\s99%\s+(\S+)", output)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    failed = int(non2xx.group(1)) if non2xx else 0
    if errors:
        failed += sum(int(g) for g in errors.groups())
    return LoadResult("wrk", requests, seconds, rps, _ms(p50.group(1)) if p50 else math.nan,
                      _ms(p99.group(1)) if p99 else math.nan, failed)


def _wrk(base_url: str, requests: Sequence[Request], connections: int, seconds: float,
         cpu: int | None) -> LoadResult:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_lua_script(requests))
    try:
        command = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency", "--timeout",
                   "10s", "-s", script.name, base_url]
        if cpu is not None and shutil.which("taskset"):
            command = ["taskset", "-c", str(cpu), *command]
        finished = subprocess.run(command, capture_output=True, text=True, check=True)
        if finished.stderr.strip():
            # wrk reports a broken script on stderr and then loads "/" instead: never count that as a result.
            raise RuntimeError(f"wrk: {finished.stderr.strip()}")
        output = finished.stdout
    finally:
        os.unlink(script.name)
    return parse_wrk(output)


# The Python fallback -------------------------------------------------------------------------------------------

async def _python_load(base_url: str, requests: Sequence[Request], connections: int, seconds: float) -> LoadResult:
    parts = urlsplit(base_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    deadline = trio.current_time() + seconds
    started = time.perf_counter()

    async def connection(offset: int) -> None:
        stream = await trio.open_tcp_stream(host, port)
        conn = h11.Connection(h11.CLIENT)
        index = offset
        async with stream:
            while trio.current_time() < deadline:
                r = requests[index % len(requests)]
                index += 1
                sent = time.perf_counter()
                await _exchange(stream, conn, host, port, r, statuses)
                latencies.append(time.perf_counter() - sent)

    async with trio.open_nursery() as nursery:
        for c in range(connections):
            nursery.start_soon(connection, c * max(1, len(requests) // max(1, connections)))
    elapsed = time.perf_counter() - started
    failed = sum(n for s, n in statuses.items() if not 200 <= s < 400)
    return LoadResult("python", len(latencies), elapsed, len(latencies) / elapsed, percentile(latencies, 50) * 1e3,
                      percentile(latencies, 99) * 1e3, failed, statuses)


def open_loop(base_urls: Sequence[str], requests: Sequence[Request], *, rate: float, seconds: float,
              connections: int) -> LoadResult:
    """Offer ``requests`` (cycled) at ``rate`` per second for ``seconds``, in turn to each of ``base_urls``, over
    ``connections`` keep-alive connections per URL. Latency runs from when a request was due; requests still
    unanswered a second after the last was due count as failed."""
    return trio.run(_open_loop, list(base_urls), requests, rate, seconds, connections)


async def _open_loop(base_urls: list[str], requests: Sequence[Request], rate: float, seconds: float,
                     connections: int) -> LoadResult:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    total = max(1, round(rate * seconds))
    queues = [trio.open_memory_channel[tuple[float, Request]](math.inf) for _ in base_urls]
    clock_offset = 0.0

    async def offer() -> None:
        start = trio.current_time()
        for index in range(total):
            due = start + index / rate
            await trio.sleep_until(due)
            queues[index % len(base_urls)][0].send_nowait((due + clock_offset, requests[index % len(requests)]))
        for send, _receive in queues:
            send.close()

    async def connection(base_url: str, receive: trio.MemoryReceiveChannel[tuple[float, Request]], *,
                         task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        parts = urlsplit(base_url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        stream = await trio.open_tcp_stream(host, port)
        conn = h11.Connection(h11.CLIENT)
        task_status.started()
        async with stream:
            async for due, r in receive:
                await _exchange(stream, conn, host, port, r, statuses)
                latencies.append(time.perf_counter() - due)

    async with trio.open_nursery() as nursery:
        for url, (_send, receive) in zip(base_urls, queues, strict=True):
            for _ in range(connections):
                await nursery.start(connection, url, receive.clone())
            receive.close()
        started = time.perf_counter()
        clock_offset = started - trio.current_time()  # perf_counter of a Trio instant
        nursery.cancel_scope.deadline = trio.current_time() + seconds + 1.0
        nursery.start_soon(offer)
    failed = total - len(latencies) + sum(n for s, n in statuses.items() if not 200 <= s < 400)
    return LoadResult("open-loop", len(latencies), seconds, len(latencies) / seconds,
                      percentile(latencies, 50) * 1e3, percentile(latencies, 99) * 1e3, failed, statuses)


async def _exchange(stream: trio.SocketStream, conn: h11.Connection, host: str, port: int, r: Request,
                    statuses: dict[int, int]) -> None:
    """Send ``r`` on a keep-alive connection and read its answer whole, counting the answer's status."""
    await stream.send_all(_encode(conn, host, port, r))
    status = await _read_response(stream, conn)
    statuses[status] = statuses.get(status, 0) + 1
    conn.start_next_cycle()


def _encode(conn: h11.Connection, host: str, port: int, r: Request) -> bytes:
    headers = [("host", f"{host}:{port}"), *r.headers]
    if r.body is not None:
        headers.append(("content-length", str(len(r.body))))
    data = conn.send(h11.Request(method=r.method, target=r.path, headers=headers)) or b""
    if r.body is not None:
        data += conn.send(h11.Data(data=r.body)) or b""
    return data + (conn.send(h11.EndOfMessage()) or b"")


async def _read_response(stream: trio.SocketStream, conn: h11.Connection) -> int:
    status = 0
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
            continue
        if isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.EndOfMessage):
            return status
        elif isinstance(event, h11.ConnectionClosed):
            raise ConnectionError("the server closed the connection")


def write_lua(path: Path, requests: Sequence[Request]) -> None:
    """Write the wrk script for ``requests`` (for running wrk by hand)."""
    path.write_text(_lua_script(requests))
