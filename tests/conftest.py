"""Shared fixtures: a controller on a temporary data directory and in-process clients for both APIs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from controller.authentication import password_hashing as passwords
from controller.runtime.composition import Controller
from tests.support import (  # noqa: F401  (re-exported for test modules that import from conftest)
    ADMIN_PASSWORD,
    ADMIN_USERNAME,
    CLIENT,
    MGMT,
    Api,
    Reply,
    make_settings,
    make_user,
    start_controller,
)
from web.app import create_app


@pytest.fixture
async def controller(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Controller]:
    yield await start_controller(make_settings(tmp_path), nursery)


@pytest.fixture
async def anon(controller: Controller) -> Api:
    return Api(create_app(controller), controller=controller)


@pytest.fixture
async def admin(anon: Api) -> Api:
    return await anon.login(ADMIN_USERNAME, ADMIN_PASSWORD)


@pytest.fixture(autouse=True)
def cheap_password_hashing() -> Iterator[None]:
    """Hash with a low scrypt cost: the suite hashes thousands of passwords. Tests of the cost itself restore it."""
    previous = passwords.use_params(passwords.ScryptParams(n=2**8, r=8, p=1))
    yield
    passwords.use_params(previous)


_CLOCKS = ("autojump_clock", "mock_clock")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a test whose fixtures ask for a Trio clock it does not ask for itself: pytest-trio runs a test on a
    clock only when the test function takes it, so such a test would run in real time while its author meant the
    virtual clock (and pass or fail with the machine's speed)."""
    wrong = []
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        wrong.extend(f"{item.nodeid} ({clock})" for clock in _CLOCKS
                     if clock in info.names_closure and clock not in info.argnames)
    if wrong:
        raise pytest.UsageError("these tests get a Trio clock from a fixture but do not take it themselves: "
                                + ", ".join(wrong))
