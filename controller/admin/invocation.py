"""What every admin verb shares: the chosen controller profile, its client, the output format, and the group that
turns failures into one line and an exit status."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from controller.admin.admin_client import AdminClient, AdminError, ConnectionProblem
from controller.admin.config import Config, ConfigProblem, NotLoggedIn, Profile, config_path
from controller.admin.exits import fail
from controller.admin.output import Format, details, dump, table

__all__ = ["AdminGroup", "State", "common_parameters", "controller_option", "emit", "emit_rows", "output_options",
           "pass_state"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    """The invocation's shared state (click's ``ctx.obj``).

    Attributes:
        controller: the profile chosen with ``--controller`` (or ``$TOLLGATE_CONTROLLER``); None for the default.
    """

    controller: str | None = None
    _profile: Profile | None = field(default=None, init=False, repr=False)

    def config(self) -> Config:
        """The configuration file's current content."""
        return Config.load(config_path())

    def profile(self) -> Profile:
        """The chosen profile, which must hold a session.

        Raises:
            NotLoggedIn: there is no such profile, or it has no session.
        """
        profile = self.config().profile(self.controller)
        if not profile.token:
            raise NotLoggedIn(f"not logged in to controller {profile.name!r}: run `tollgate login {profile.url}`")
        return profile

    def client(self) -> AdminClient:
        """A client for the chosen profile's session, closed when the verb ends."""
        profile = self.profile()
        self._profile = profile
        return click.get_current_context().with_resource(AdminClient.from_profile(profile))

    def session_ended(self) -> bool:
        """Whether the session of the client handed out is no longer valid (so a 401 means "log in again", not
        "this identity may not do that")."""
        if self._profile is None:
            return False
        try:
            with AdminClient.from_profile(self._profile) as client:
                client.request("GET", "current-api-session")
        except (AdminError, ConnectionProblem):
            return True
        return False


pass_state = click.make_pass_decorator(State, ensure=True)


def _remember_controller(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(State).controller = value


_CONTROLLER: dict[str, Any] = {"metavar": "NAME", "expose_value": False, "callback": _remember_controller,
                               "is_eager": True, "help": "the saved controller to use (the default one)"}
_OUTPUT: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--json", {"flag_value": Format.JSON.value, "default": Format.TEXT.value, "help": "print the data as JSON"}),
    ("--yaml", {"flag_value": Format.YAML.value, "help": "print the data as YAML"}),
)


def controller_option(command: F) -> F:
    """``--controller NAME``: use that saved controller instead of the default one (also accepted after the verb)."""
    return click.option("--controller", **_CONTROLLER)(command)


def output_options(command: F) -> F:
    """``--json`` / ``--yaml``: print the raw data for scripts instead of a table; passed as ``output: str`` (a
    :class:`Format` value)."""
    for flag, attributes in reversed(_OUTPUT):
        command = click.option(flag, "output", **attributes)(command)
    return command


def common_parameters(*, output: bool) -> list[click.Parameter]:
    """``--controller`` and, when ``output``, ``--json``/``--yaml``, for commands built without decorators."""
    parameters: list[click.Parameter] = [click.Option(["--controller"], **_CONTROLLER)]
    if output:
        parameters.extend(click.Option([flag, "output"], **attributes) for flag, attributes in _OUTPUT)
    return parameters


def emit(data: Any, output: str, text: Callable[[Any], str] | None = None) -> None:
    """Print ``data``: dumped as JSON/YAML, or as people read it (``text(data)``, by default key/value details)."""
    chosen = Format(output)
    if chosen is not Format.TEXT:
        click.echo(dump(data, chosen))
        return
    rendered = text(data) if text is not None else details(data)
    if rendered:
        click.echo(rendered)


def emit_rows(rows: list[dict[str, Any]], output: str, columns: tuple[tuple[str, str], ...]) -> None:
    """Print list rows as a table, or dumped as JSON/YAML."""
    emit(rows, output, lambda data: table(data, columns))


class AdminGroup(click.Group):
    """The ``tollgate`` group: a verb's failure becomes one line on standard error and the status of
    :mod:`controller.admin.exits`, for its own verbs and for any added to it."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (AdminError, ConnectionProblem, ConfigProblem) as error:
            state = ctx.find_object(State)
            ended = isinstance(error, AdminError) and error.status == 401 and state is not None \
                and state.session_ended()
            raise fail(error, had_session=ended) from None
