"""``GET /events`` (filters, paging, errors) in process, and ``GET /events/stream`` over a real socket: Server-Sent
Events with ids, resumed from ``Last-Event-ID`` without a loss or a repeat, a heartbeat on a quiet stream, filters,
and the end of the stream with the caller's API session or the controller."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import h11
import httpx
import msgspec
import trio

from controller.runtime.composition import Controller
from tests.insight.events_support import mark
from tests.support import (
    ADMIN_PASSWORD,
    ADMIN_USERNAME,
    MGMT,
    Api,
    make_settings,
    make_user,
    seed_pki,
    serving,
    start_controller,
)
from web.app import create_app

WAIT = 30  # seconds a socket test waits for what must come: generous, as the machine may be loaded


async def test_listing_filters_by_type_identity_service_and_time_and_pages_by_id(admin: Api,
                                                                                 controller: Controller) -> None:
    start = mark(controller)
    alice, _ = await make_user(admin, "alice")
    service = await admin.create("/services", {"name": "wiki", "encryptionRequired": True})
    await admin.patch(f"/services/{service}", {"roleAttributes": ["x"]})
    latest = mark(controller)

    everything = await admin.get("/events", query={"after": str(start), "limit": "1000"})
    assert [e["event_id"] for e in everything.data] == list(range(start + 1, latest + 1))
    assert everything.body["meta"]["latestEventId"] == latest and everything.body["meta"]["more"] is False

    about_service = (await admin.get("/events", query={"service": service})).data
    assert [(e["eventType"], e["entityId"]) for e in about_service] == [("created", service), ("updated", service)]
    about_alice = (await admin.get("/events", query={"identity": alice, "after": str(start)})).data
    assert {e["namespace"] for e in about_alice} == {"entityChange", "edge.apiSessions"}
    assert all(e.get("identity_id") == alice or e.get("entityId") == alice for e in about_alice)
    logins = (await admin.get("/events", query={"type": "edge.apiSessions.created,authentication"})).data
    assert logins and {e["event_type"] for e in logins} == {"created"}

    newest_two = await admin.get("/events", query={"limit": "2"})
    assert [e["event_id"] for e in newest_two.data] == [latest - 1, latest]
    assert newest_two.body["meta"]["more"] is True
    before = await admin.get("/events", query={"limit": "2", "before": str(latest - 1)})
    assert [e["event_id"] for e in before.data] == [latest - 3, latest - 2]
    stamp = everything.data[-1]["timestamp"]
    assert all(e["timestamp"] >= stamp for e in (await admin.get("/events", query={"since": stamp})).data)
    assert all(e["timestamp"] < stamp for e in (await admin.get("/events", query={"until": stamp})).data)


async def test_bad_event_queries_are_refused(admin: Api) -> None:
    for query, code, field in (({"type": "nonsense"}, "COULD_NOT_VALIDATE", "type"),
                               ({"limit": "0"}, "INVALID_PAGINATION", "limit"),
                               ({"limit": "1001"}, "INVALID_PAGINATION", "limit"),
                               ({"after": "x"}, "INVALID_PAGINATION", "after"),
                               ({"since": "yesterday"}, "COULD_NOT_VALIDATE", "since"),
                               ({"until": ""}, "COULD_NOT_VALIDATE", "until")):
        reply = await admin.get("/events", query=query)
        assert (reply.status, reply.error["code"], reply.error["cause"]["field"]) == (400, code, field), query


async def test_a_stream_refuses_resume_ids_that_are_not_event_ids(admin: Api) -> None:
    """Every resume id given is checked, the one not used as well (the header wins over the query)."""
    for headers, query, field in (({"Last-Event-ID": "0"}, {"lastEventId": "null"}, "lastEventId"),
                                  ({"Last-Event-ID": "x"}, None, "Last-Event-ID"),
                                  (None, {"lastEventId": "-1"}, "lastEventId"),
                                  (None, {"lastEventId": ["1", "2"]}, "lastEventId")):
        reply = await admin.get("/events/stream", headers=headers, query=query)
        assert (reply.status, reply.error["code"], reply.error["cause"]["field"]) == (
            400, "COULD_NOT_VALIDATE", field), (headers, query)


async def test_events_off_records_nothing(tmp_path: Path, nursery: trio.Nursery) -> None:
    controller = await start_controller(make_settings(tmp_path, events=False), nursery)
    admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
    await admin.create("/services", {"name": "quiet", "encryptionRequired": True})
    listed = await admin.get("/events")
    assert listed.data == [] and listed.body["meta"]["latestEventId"] == 0


# Server-Sent Events over a real socket ----------------------------------------------------------------------------


class Stream:
    """One open event stream on a plain socket (h11): its frames as they come."""

    def __init__(self, socket: trio.SocketStream, connection: h11.Connection) -> None:
        self.socket = socket
        self.connection = connection
        self.buffer = ""
        self.status = 0
        self.headers: dict[str, str] = {}

    async def _more(self) -> None:
        while True:
            event = self.connection.next_event()
            if event is h11.NEED_DATA:
                data = await self.socket.receive_some()
                if not data:
                    raise EOFError
                self.connection.receive_data(data)
            elif isinstance(event, h11.Response):
                self.status = event.status_code
                self.headers = {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                self.buffer += bytes(event.data).decode()
                return
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                raise EOFError

    async def next_frame(self) -> tuple[str | None, Any]:
        """The next event (id, JSON), ``(None, comment)``, or ``("event:NAME", data)`` for a named event."""
        while "\n\n" not in self.buffer:
            await self._more()
        frame, self.buffer = self.buffer.split("\n\n", 1)
        fields: dict[str, str] = {}
        for line in frame.split("\n"):
            if line.startswith(":"):
                fields.setdefault("comment", line[1:].strip())
            else:
                key, _, value = line.partition(":")
                fields[key] = value.removeprefix(" ")
        if "data" in fields:
            name = fields.get("event")
            data = msgspec.json.decode(fields["data"])
            return (f"event:{name}", data) if name else (fields.get("id"), data)
        return None, fields.get("comment")

    async def next_event(self) -> tuple[int, dict[str, Any]]:
        while True:
            event_id, data = await self.next_frame()
            if event_id is not None and not event_id.startswith("event:"):
                return int(event_id), data


@asynccontextmanager
async def open_stream(url: str, token: str, last: int | None = None, **query: str) -> AsyncIterator[Stream]:
    """``GET /events/stream`` on a socket of its own, closed when the block ends."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    target = f"{MGMT}/events/stream" + (f"?{urlencode(query)}" if query else "")
    headers = [("Host", f"{host}:{port}"), ("zt-session", token)]
    if last is not None:
        headers.append(("Last-Event-ID", str(last)))
    socket = await trio.open_tcp_stream(host, port)
    async with socket:
        connection = h11.Connection(h11.CLIENT)
        await socket.send_all(connection.send(h11.Request(method="GET", target=target, headers=headers))
                              + connection.send(h11.EndOfMessage()))
        stream = Stream(socket, connection)
        while not stream.status:
            await stream._more()
        assert stream.status == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        yield stream


async def _login(client: httpx.AsyncClient) -> str:
    reply = await client.post(f"{MGMT}/authenticate", params={"method": "password"},
                              json={"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD})
    assert reply.status_code == 200
    return str(reply.json()["data"]["token"])


async def _service(client: httpx.AsyncClient, token: str, name: str) -> str:
    reply = await client.post(f"{MGMT}/services", headers={"zt-session": token},
                              json={"name": name, "encryptionRequired": True})
    assert reply.status_code == 201
    return str(reply.json()["data"]["id"])


async def test_a_stream_resumes_after_last_event_id_over_a_real_socket(tmp_path: Path) -> None:
    seed_pki(tmp_path)
    settings = make_settings(tmp_path, worker_threads=True, durable=True, port=0, events_heartbeat=0.5)
    async with serving(settings) as (_controller, urls), httpx.AsyncClient(base_url=urls[0], timeout=WAIT) as client:
        token = await _login(client)
        with trio.fail_after(WAIT):
            async with open_stream(urls[0], token) as stream:
                assert await stream.next_frame() == (None, "tollgate events")
                first = await _service(client, token, "first")
                seen, event = await stream.next_event()
                assert (event["entityId"], event["eventType"], event["event_id"]) == (first, "created", seen)
                # Quiet: a heartbeat comment comes within the heartbeat.
                assert await stream.next_frame() == (None, "heartbeat")
            # Disconnected: what happens now is kept, and a resumed stream starts right after what was seen.
            missed = [await _service(client, token, f"missed-{n}") for n in range(3)]
            async with open_stream(urls[0], token, seen) as stream:
                await stream.next_frame()
                resumed = [await stream.next_event() for _ in range(3)]
                assert [event_id for event_id, _ in resumed] == [seen + 1, seen + 2, seen + 3]
                assert [event["entityId"] for _, event in resumed] == missed
                later = await _service(client, token, "later")
                assert (await stream.next_event())[1]["entityId"] == later


async def test_a_stream_filters_and_ends_with_its_api_session(tmp_path: Path) -> None:
    seed_pki(tmp_path)
    settings = make_settings(tmp_path, worker_threads=True, durable=True, port=0, events_heartbeat=0.5)
    async with serving(settings) as (_controller, urls), httpx.AsyncClient(base_url=urls[0], timeout=WAIT) as client:
        token, watcher = await _login(client), await _login(client)
        with trio.fail_after(WAIT):
            async with open_stream(urls[0], watcher, None, type="entityChange") as stream:
                await stream.next_frame()
                await client.post(f"{MGMT}/authenticate", params={"method": "password"},
                                  json={"username": ADMIN_USERNAME, "password": "wrong-password"})
                created = await _service(client, token, "filtered")
                _, event = await stream.next_event()
                assert (event["namespace"], event["entityId"]) == ("entityChange", created)  # no login events
                assert (await client.delete(f"{MGMT}/current-api-session",
                                            headers={"zt-session": watcher})).status_code == 200
                try:
                    while True:
                        await stream.next_frame()
                except EOFError:
                    pass  # the stream ended with the watcher's session
