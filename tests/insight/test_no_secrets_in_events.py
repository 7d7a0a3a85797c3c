"""No secret, code, token, password or key ever appears in an event: a full scenario, then every kept event's text is
searched for every such value the scenario used."""

from __future__ import annotations

from trio.testing import MockClock

from controller.insight import kept_events
from controller.runtime.composition import Controller
from tests.support import ADMIN_PASSWORD, Api, next_totp, totp
from tests.web.test_client_posture import MAC_BAD, MAC_OK, dial_policy, network
from tests.web.test_mfa import secret_of, start, wrong


async def test_no_event_holds_a_secret(admin: Api, controller: Controller, autojump_clock: MockClock) -> None:
    secrets: list[str] = [ADMIN_PASSWORD, str(admin.token)]
    ids = await network(admin)
    await admin.create("/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                           "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
    await dial_policy(admin, "p", ["#mac"])
    # An identity with a password and a one-time-token enrollment.
    identity = await admin.create("/identities", {"name": "secretive", "type": "User", "isAdmin": False,
                                                  "roleAttributes": ["u"], "enrollment": {"ott": True}})
    enrollment = (await admin.get(f"/identities/{identity}")).data["enrollment"]["ott"]
    secrets += [enrollment["token"], enrollment["jwt"]]
    password = "first-password-123"
    authenticator = await admin.create("/authenticators", {"identityId": identity, "method": "updb",
                                                           "username": "secretive", "password": password})
    secrets.append(password)
    wrong_password = "guess-password-456"
    await admin.with_token(None).post("/authenticate", {"username": "secretive", "password": wrong_password},
                                      query={"method": "password"})
    secrets.append(wrong_password)
    client = (await admin.login("secretive", password)).as_client()
    secrets.append(str(client.token))
    # MFA: the secret, the codes used (right and wrong), the recovery codes.
    detail = await start(client)
    secret = secret_of(detail)
    secrets += [secret, *detail["recoveryCodes"]]
    code = totp(controller, secret)
    secrets.append(code)
    await client.post("/current-identity/mfa/verify", {"code": code})
    bad = wrong(controller, secret)
    secrets.append(bad)
    await client.post("/authenticate/mfa", {"code": bad})
    await client.post("/authenticate/mfa", {"code": detail["recoveryCodes"][0]})
    # A refusal, a session (its token), a revocation, a password change, a logout.
    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 409
    await client.post("/posture-response", MAC_OK)
    session = await client.post("/sessions", {"serviceId": ids["service"]})
    assert session.status == 201
    secrets.append(session.data["token"])
    await client.post("/posture-response", MAC_BAD)
    new_password = "second-password-789"
    await admin.put(f"/authenticators/{authenticator}", {"username": "secretive", "password": new_password})
    secrets.append(new_password)
    removal = await next_totp(controller, secret)
    secrets.append(removal)
    await client.delete("/current-identity/mfa", headers={"mfa-validation-code": removal})
    await client.delete("/current-api-session")

    with controller.store.read() as txn:
        texts = [event.data.decode() for event in kept_events(txn)]
    namespaces = {text.split('"namespace":"')[1].split('"')[0] for text in texts}
    assert {"edge.apiSessions", "edge.sessions", "entityChange", "authentication", "posture", "access",
            "mfa"} <= namespaces
    leaks = sorted({value for value in secrets if value and any(value in text for text in texts)})
    assert leaks == []
