"""The check of the ``crash`` scenario (``bench/crash_bench.py``): a controller restarted after ``kill -9`` holds
every write acknowledged before the kill, and its re-armed MFA deadlines revoke in time.
"""

from __future__ import annotations

import time
from collections.abc import Container, Iterable
from datetime import datetime
from typing import Any

import httpx
import trio

from bench.crash_load import CLIENT, MGMT, SDK_INFO, Ledger, Model

__all__ = ["REVOCATION_GRACE", "RestartCheck"]

REVOCATION_GRACE = 20.0  # seconds after a deadline (or the restart, if later) within which its session must go
AHEAD_MARGIN = 0.1  # a deadline this far after the first listing's answer was surely ahead of its snapshot
POLL = 0.1
CHECK_CONCURRENCY = 8


def _wall(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


class RestartCheck:
    """The check of one restarted controller against the ledger of what was acknowledged before the kill."""

    def __init__(self, client: httpx.AsyncClient, model: Model, ledger: Ledger,
                 revocation_grace: float = REVOCATION_GRACE) -> None:
        self.client = client
        self.revocation_grace = revocation_grace
        self.model = model
        self.ledger = ledger
        self.lost: dict[str, list[str]] = {kind: [] for kind in ledger.acknowledged()}
        self.errors: list[str] = []  # check requests the restarted controller failed to answer

    async def _get(self, path: str, token: str | None = None) -> httpx.Response:
        return await self.client.get(path, headers={"zt-session": token or self.model.admin_token})

    async def _data(self, path: str) -> Any:
        reply = await self._get(path)
        if reply.status_code != 200:
            raise RuntimeError(f"GET {path} after the restart: {reply.status_code} {reply.text}")
        return reply.json()["data"]

    async def _listing(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every row of a management list, in one page (one consistent snapshot)."""
        return {str(item["id"]): item for item in await self._data(f"{MGMT}/{kind}?limit=-1")}

    async def _sessions(self) -> tuple[set[str], float]:
        """The ids of every Dial/Bind session and the wall-clock time its answer arrived."""
        ids = set(await self._listing("sessions"))
        return ids, time.time()

    async def _posture_data(self, identity_ids: set[str]) -> dict[str, dict[str, Any]]:
        """The posture data of each identity; one the controller fails to answer is left out, its failure recorded
        in :attr:`errors`."""
        found: dict[str, dict[str, Any]] = {}
        limiter = trio.CapacityLimiter(CHECK_CONCURRENCY)

        async def fetch(identity_id: str) -> None:
            path = f"{MGMT}/identities/{identity_id}/posture-data"
            async with limiter:
                reply = await self._get(path)
            if reply.status_code == 200:
                found[identity_id] = reply.json()["data"]
            else:
                self.errors.append(f"GET {path}: {reply.status_code} {reply.text[:300]}")

        async with trio.open_nursery() as nursery:
            for identity_id in sorted(identity_ids):
                nursery.start_soon(fetch, identity_id)
        return found

    def _missing(self, kind: str, acknowledged: Iterable[str], found: Container[str]) -> None:
        self.lost[kind] += sorted(i for i in acknowledged if i not in found)

    async def run(self, kill_wall: float, serving_wall: float) -> dict[str, Any]:
        """Check everything (see the module's docstring); returns the trial's check figures."""
        ledger = self.ledger
        first, listed_at = await self._sessions()  # first: what the restart did before any other request
        identities = await self._listing("identities")
        self._missing("identity", ledger.identities, identities)
        self._missing("authenticator", ledger.authenticators, await self._listing("authenticators"))
        self._missing("api-session", ledger.logins, await self._listing("api-sessions"))
        passed_at = await self._posture(identities)
        short = {sid: passed_at[s.api_session_id] + self.model.short_timeout for sid, s in ledger.sessions.items()
                 if s.service == "mfa-short" and s.api_session_id in passed_at}
        gone, last = await self._await_revocations(short, first, listed_at, serving_wall)
        lasting = {sid for sid, s in ledger.sessions.items() if s.service != "mfa-short"}
        self._missing("session", lasting, first & last)
        before = {sid for sid, deadline in short.items() if deadline <= kill_wall}
        down = {sid for sid, deadline in short.items() if kill_wall < deadline <= serving_wall}
        ahead = {sid for sid, deadline in short.items() if deadline > listed_at + AHEAD_MARGIN}
        self._missing("session", ahead, first)  # revoked before its deadline, or never stored
        return {"lost": {kind: len(ids) for kind, ids in self.lost.items()}, "check_errors": self.errors,
                "lost_ids": {kind: ids for kind, ids in self.lost.items() if ids},
                "deadlines": {"before_kill": len(before), "while_down": len(down), "ahead": len(ahead & first),
                              "at_first_listing": len(short) - len(before | down | ahead),
                              "pending_at_kill": len(short) - len(before)},
                "not_fired": sorted(set(short) - set(gone)),
                "revoked_after_restart_s": sorted(gone[sid] - serving_wall for sid in down if sid in gone),
                "fired_after_deadline_s": sorted(gone[sid] - short[sid] for sid in ahead & first if sid in gone)}

    async def _posture(self, identities: dict[str, dict[str, Any]]) -> dict[str, float]:
        """Check posture reports and MFA of every acknowledged login; returns when each API session that verified
        MFA passed it (wall clock), from its posture data."""
        posture = await self._posture_data({u.identity_id for u in self.ledger.logins.values()})
        passed_at: dict[str, float] = {}
        for api_session_id, user in sorted(self.ledger.logins.items()):
            # Unreadable posture data shows none of what the login acknowledged: counted lost (and in errors).
            data = posture.get(user.identity_id, {"processes": [], "apiSessionPostureData": {}})
            if data["apiSessionPostureData"].get(api_session_id, {}).get("sdkInfo") != SDK_INFO:
                self.lost["login-sdk-info"].append(api_session_id)
            self._missing("posture-report", user.reports, {p["postureCheckId"] for p in data["processes"]})
            if user.mfa_verified:
                if not identities.get(user.identity_id, {}).get("isMfaEnabled"):
                    self.lost["mfa-verified"].append(user.identity_id)
                mfa = data["apiSessionPostureData"].get(api_session_id, {}).get("mfa", {})
                if mfa.get("passedMfa") and mfa.get("passedAt"):
                    passed_at[api_session_id] = _wall(mfa["passedAt"])
                else:
                    self.lost["mfa-pass"].append(api_session_id)
            elif user.mfa_started:
                reply = await self._get(f"{CLIENT}/current-identity/mfa", user.token)
                if reply.status_code != 200:
                    self.lost["mfa-enrolment"].append(user.identity_id)
        return passed_at

    async def _await_revocations(self, short: dict[str, float], first: set[str], listed_at: float,
                                 serving_wall: float) -> tuple[dict[str, float], set[str]]:
        """List sessions until every short-MFA session is gone or the revocation grace has passed after the last
        deadline; returns when each was first seen gone (wall clock) and the last listing."""
        gone = {sid: listed_at for sid in short if sid not in first}
        last = first
        limit = max([serving_wall, *short.values()]) + self.revocation_grace
        while set(short) - set(gone) and time.time() < limit:
            await trio.sleep(POLL)
            last, at = await self._sessions()
            gone.update({sid: at for sid in short if sid not in gone and sid not in last})
        return gone, last
