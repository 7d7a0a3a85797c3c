"""The load generator: reading wrk's report and writing its script, and the open-loop load against servers on
loopback."""

from __future__ import annotations

import math
from collections.abc import Callable

import h11
import trio

from bench.loadgen import LoadResult, Request, _lua_script, open_loop, parse_wrk

WRK_OUTPUT = """Running 5s test @ http://127.0.0.1:41913
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    20.24ms    1.50ms  35.62ms   82.77%
    Req/Sec   789.35     44.13     0.91k    80.00%
  Latency Distribution
     50%  850.00us
     75%   20.84ms
     90%   21.53ms
     99%    1.25s
  3950 requests in 5.01s, 253.71KB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:    788.42
Transfer/sec:    126.80KB
"""


def test_parse_wrk_reads_rate_percentiles_and_failures() -> None:
    result = parse_wrk(WRK_OUTPUT)
    assert result.rps == 788.42
    assert result.requests == 3950
    assert math.isclose(result.seconds, 5.01)
    assert math.isclose(result.p50_ms, 0.85)
    assert math.isclose(result.p99_ms, 1250.0)
    assert result.failed == 7 + 2 + 1


def test_parse_wrk_without_failures() -> None:
    clean = "\n".join(line for line in WRK_OUTPUT.splitlines() if "errors" not in line and "Non-2xx" not in line)
    assert parse_wrk(clean).failed == 0


def test_lua_script_splits_large_request_lists_into_functions() -> None:
    requests = [Request.make("POST", f"/x/{i}", "token", {"name": f"n-{i}"}) for i in range(1200)]
    script = _lua_script(requests)
    assert script.count("do local chunk = function()") == 3  # 500 + 500 + 200: a Lua function's constant limit
    assert script.count("add(") == 1200 + 1  # every request, plus the definition of add itself
    assert '[ [==[zt-session]==] ] = [==[token]==]' in script
    assert '[==[{"name": "n-1199"}]==]' in script


async def _serve(delay: float, seen: list[str], *, task_status: trio.TaskStatus[str]) -> None:
    """An HTTP server on loopback answering 200 to each request after ``delay`` seconds, one at a time per
    connection; records each request's path."""

    async def handle(stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                seen.append(event.target.decode())
            elif isinstance(event, h11.EndOfMessage):
                await trio.sleep(delay)
                await stream.send_all(conn.send(h11.Response(status_code=200, headers=[("content-length", "0")]))
                                      + conn.send(h11.EndOfMessage()))
                conn.start_next_cycle()
            else:
                return

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        task_status.started(f"http://127.0.0.1:{port}")
        await trio.serve_listeners(handle, listeners, handler_nursery=nursery)


async def _servers(delays: list[float], seen: list[list[str]], run: Callable[[list[str]], LoadResult]) -> LoadResult:
    async with trio.open_nursery() as nursery:
        urls = [await nursery.start(_serve, delay, log) for delay, log in zip(delays, seen, strict=True)]
        result = await trio.to_thread.run_sync(run, urls)
        nursery.cancel_scope.cancel()
    return result


async def test_open_loop_offers_every_request_in_turn_to_each_server() -> None:
    seen: list[list[str]] = [[], []]
    requests = [Request.make("GET", f"/r/{i}") for i in range(4)]
    result = await _servers([0.0, 0.0], seen, lambda urls: open_loop(urls, requests, rate=200, seconds=0.5,
                                                                     connections=2))
    assert result.requests == 100 and result.failed == 0 and result.statuses == {200: 100}
    assert set(seen[0]) == {"/r/0", "/r/2"} and set(seen[1]) == {"/r/1", "/r/3"}
    assert len(seen[0]) == len(seen[1]) == 50


async def test_open_loop_counts_the_time_a_request_waits_behind_slow_answers() -> None:
    """30 requests due over 0.3 s to one connection whose server takes at least 20 ms per answer: the last ones
    are answered at least 0.6 s after the first was due, about 0.3 s after they were due themselves; a closed
    loop would report 20 ms."""
    seen: list[list[str]] = [[]]
    requests = [Request.make("GET", "/slow")]
    result = await _servers([0.02], seen, lambda urls: open_loop(urls, requests, rate=100, seconds=0.3,
                                                                 connections=1))
    assert result.requests + result.failed == 30
    assert result.p99_ms >= 250
