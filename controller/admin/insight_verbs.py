"""``tollgate events [--follow] [FILTER...]`` and ``tollgate access IDENTITY SERVICE``: what happened, and why an
identity can or cannot use a service now, for people (``--json``/``--yaml`` for scripts)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import click
import msgspec

from controller.admin.admin_client import AdminClient
from controller.admin.invocation import State, controller_option, emit, output_options, pass_state
from controller.admin.output import Format, cell, dump

__all__ = ["access", "access_report", "event_line", "events"]

_FILTERS = ("type", "identity", "service", "since", "until")
_SUBJECTS = ("identity_id", "service_id", "session_id", "api_session_id", "entityType", "entityId")


def event_line(event: Mapping[str, Any]) -> str:
    """One event on one line: id, time, type, whom it is about, and its cause or reason."""
    head = f"#{event.get('event_id')} {event.get('timestamp')} {event.get('namespace')}.{event.get('event_type')}"
    about = " ".join(f"{key}={event[key]}" for key in _SUBJECTS if event.get(key))
    cause = event.get("cause") or {}
    detail = ""
    if isinstance(cause, Mapping) and cause:
        detail = f" cause={cause.get('code')}"
        if cause.get("at"):
            detail += f" at={cause['at']}"
        checks = cause.get("checks") or []
        detail += "".join(f" [{c.get('postureCheckName')}: {c.get('rule')} reported={cell(c.get('reported'))}]"
                          for c in checks)
    elif event.get("reason"):
        detail = f" reason={event['reason']}"
    return f"{head} {about}{detail}".rstrip()


def _query(client: AdminClient, filters: Mapping[str, str]) -> dict[str, str]:
    """The filter with identity and service names turned into ids."""
    out = dict(filters)
    for key, kind in (("identity", "identities"), ("service", "services")):
        if key in out:
            out[key] = client.resolve(kind, out[key])
    return out


def _stream(client: AdminClient, query: Mapping[str, str], after: int | None) -> Iterator[dict[str, Any]]:
    """Follow ``GET /events/stream`` (resuming after ``after``), one event at a time."""
    headers = {"Last-Event-ID": str(after)} if after is not None else {}
    data: list[str] = []
    for line in client.stream_lines("events/stream", params=query, headers=headers):
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            yield msgspec.json.decode("".join(data))
            data = []


@click.command()
@controller_option
@click.argument("filters", metavar="[FILTER...]", nargs=-1)
@click.option("--follow", "-f", is_flag=True, help="after the kept events, print new ones as they happen")
@click.option("--limit", type=int, default=100, show_default=True, help="kept events to show (1-1000)")
@output_options
@pass_state
def events(state: State, filters: tuple[str, ...], follow: bool, limit: int, output: str) -> None:
    """The controller's events, oldest first: the last LIMIT that match, then with --follow every new one.

    FILTER is NAME=VALUE: type=NAMESPACE[.TYPE] (access, access.revoked, posture.denied, edge.apiSessions...),
    identity=ID|NAME, service=ID|NAME, since=TIME, until=TIME (RFC 3339).
    """
    wanted: dict[str, str] = {}
    for item in filters:
        name, sep, value = item.partition("=")
        if not sep or name not in _FILTERS:
            raise click.BadParameter(f"{item!r}: give NAME=VALUE with NAME one of {', '.join(_FILTERS)}",
                                     param_hint="FILTER")
        wanted[name] = value
    client = state.client()
    query = _query(client, wanted)
    kept = list(client.request("GET", "events", params={**query, "limit": limit}) or [])
    chosen = Format(output)

    def show(event: Mapping[str, Any]) -> None:
        if chosen is Format.JSON:
            click.echo(msgspec.json.encode(event).decode())  # JSON lines, as the event file holds them
        else:
            click.echo(event_line(event) if chosen is Format.TEXT else dump([event], chosen))

    for event in kept:
        show(event)
    if follow:
        last = int(kept[-1]["event_id"]) if kept else None
        if last is None:
            latest = client.request("GET", "events", params={"limit": 1}) or []
            last = int(latest[-1]["event_id"]) if latest else 0
        for event in _stream(client, query, last):
            show(event)


def access_report(data: Mapping[str, Any]) -> str:
    """The access explanation as people read it."""
    lines = [f"identity:   {cell((data.get('identity') or {}).get('name'))} ({(data.get('identity') or {}).get('id')})",
             f"service:    {cell((data.get('service') or {}).get('name'))} ({(data.get('service') or {}).get('id')})",
             f"at:         {data.get('evaluatedAt')}, api session "
             f"{(data.get('apiSession') or {}).get('id') or 'none (as a new login)'}"]
    for entry in data.get("sessionTypes") or []:
        lines.append(f"{entry.get('type')}: {entry.get('summary')}")
        for policy in entry.get("policies") or []:
            linked = " ".join((policy.get("linkedBy") or {}).get("identityRoles") or []) or "-"
            lines.append(f"  policy {policy.get('name')} ({'passes' if policy.get('passing') else 'fails'}; "
                         f"linked by {linked})")
            for check in policy.get("checks") or []:
                verdict = "passes" if check.get("passing") else f"FAILS: {check.get('rule')}"
                only = " [report-only]" if check.get("reportOnly") else ""
                lines.append(f"    check {check.get('name')} ({check.get('typeId')}){only} {verdict}")
        if entry.get("nextChange"):
            lines.append(f"  changes at {entry['nextChange'].get('at')} to {entry['nextChange'].get('code')}")
        lines.extend(f"  to do: {action}" for action in entry.get("actions") or [])
    routers = data.get("edgeRouters") or {}
    lines.append("edge routers in common: " + (", ".join(
        f"{r.get('name')} ({'online' if r.get('isOnline') else 'offline'})" for r in routers.get("common") or [])
        or "none"))
    lines.append(f"verdict:    {data.get('verdict')}")
    return "\n".join(lines)


@click.command()
@controller_option
@click.argument("identity")
@click.argument("service")
@click.option("--api-session", metavar="ID", help="the API session whose MFA state counts (default: the newest)")
@output_options
@pass_state
def access(state: State, identity: str, service: str, api_session: str | None, output: str) -> None:
    """Why IDENTITY can or cannot dial or bind SERVICE now (ids or names): policies, checks, deadlines, routers."""
    client = state.client()
    identity_id = client.resolve("identities", identity)
    service_id = client.resolve("services", service)
    data = client.request("GET", f"identities/{identity_id}/access/{service_id}",
                          params={"apiSessionId": api_session}) or {}
    emit(data, output, access_report)
