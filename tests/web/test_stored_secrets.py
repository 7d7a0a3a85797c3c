"""What the data directory keeps: no session or enrolment token as sent, nothing readable by other local users.

A copy of the store (a backup, a leaked file) must let nobody in: API-session tokens are kept as SHA-256 digests,
enrolment tokens as a nonce and a digest (the token is derived with a key kept beside the CA key). The files are
the controller user's alone."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from controller.authentication.api_sessions import KIND, TOKEN_DIGEST, token_digest
from controller.model.spec import WriteContext
from controller.runtime.bootstrap import bootstrap
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, running
from web.app import create_app


def _stored_bytes(data_dir: Path) -> bytes:
    return (data_dir / "db" / "data.mdb").read_bytes()


async def test_session_tokens_are_kept_as_digests(tmp_path: Path) -> None:
    async with running(tmp_path) as controller:
        anon = Api(create_app(controller), controller=controller)
        admin = await anon.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        assert admin.token is not None
        mine = await admin.get("/current-api-session")
        assert mine.data["token"] == admin.token  # its own client sees it
        listed = (await admin.get("/api-sessions")).data
        assert [s["token"] for s in listed] == [""]  # nobody else does, admins included
        assert (await admin.get(f"/api-sessions/{mine.data['id']}")).data["token"] == ""
        digest = token_digest(admin.token)
    stored = _stored_bytes(tmp_path)
    assert admin.token.encode() not in stored
    assert digest.encode() in stored
    async with running(tmp_path) as controller:
        again = Api(create_app(controller), controller=controller, token=admin.token)
        assert (await again.get("/current-identity")).status == 200  # the digest finds it after a restart


async def test_enrolment_tokens_are_not_stored(tmp_path: Path) -> None:
    async with running(tmp_path) as controller:
        admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
        identity_id = await admin.create("/identities", {"name": "pending", "type": "Device", "isAdmin": False,
                                                         "enrollment": {"ott": True}})
        ott = (await admin.get(f"/identities/{identity_id}")).data["enrollment"]["ott"]
    assert ott["token"].encode() not in _stored_bytes(tmp_path)
    key = tmp_path / "pki" / "enrollment-tokens.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    async with running(tmp_path) as controller:
        admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
        # The same token after a restart: it is derived, not drawn again.
        assert (await admin.get(f"/identities/{identity_id}")).data["enrollment"]["ott"]["token"] == ott["token"]


async def test_tokens_an_earlier_version_stored_are_replaced_by_digests(tmp_path: Path) -> None:
    async with running(tmp_path) as controller:
        admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
        assert admin.token is not None
        session_id = (await admin.get("/current-api-session")).data["id"]

        def as_before(ctx: WriteContext) -> None:
            row = ctx.txn.get(KIND, session_id)
            assert row is not None
            ctx.txn.put(KIND, {**{k: v for k, v in row.items() if k != TOKEN_DIGEST}, "token": admin.token})

        await controller.domain.write(as_before)
    async with running(tmp_path) as controller:
        await bootstrap(controller)
        with controller.store.read() as txn:
            row = txn.get(KIND, session_id)
        assert row is not None and "token" not in row and row[TOKEN_DIGEST] == token_digest(admin.token)
        again = Api(create_app(controller), controller=controller, token=admin.token)
        assert (await again.get("/current-identity")).status == 200


async def test_the_data_directory_is_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    (data / "db").mkdir(mode=0o755)
    async with running(data, admin_password=None):
        pass
    for directory in (data, data / "db", data / "pki"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    for private in ("db/data.mdb", "db/lock.mdb", "pki/ca.key", "pki/server.key", "admin-credentials"):
        assert stat.S_IMODE((data / private).stat().st_mode) == 0o600, private
    assert os.stat(data).st_uid == os.getuid()
