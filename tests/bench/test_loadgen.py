"""The load generator's parts that do not need a server: reading wrk's report and writing its script."""

from __future__ import annotations

import math

from bench.loadgen import Request, _lua_script, parse_wrk

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
