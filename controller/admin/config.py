"""The admin CLI's per-user configuration: named controller profiles, the default one, and their session tokens.

The file (``$TOLLGATE_CONFIG``, else ``~/.config/tollgate/cli.yaml``) holds API session tokens, so it is only ever
written with mode 0600, through a temporary file renamed over the old one (a crash leaves the old file or the new
one, never half of one). A controller's CA bundle, fetched and confirmed at the first login, is kept beside it in
``ca/<profile>.pem``.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["DEFAULT_PROFILE", "PROFILE_NAME", "Config", "ConfigProblem", "NotLoggedIn", "Profile", "config_path"]

DEFAULT_PROFILE = "default"
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
"""What a profile's name may be: it names a file (its CA bundle), so no path separators."""
_FILE_MODE = 0o600
_DIRECTORY_MODE = 0o700


class ConfigProblem(Exception):
    """The configuration file cannot be read or does not have the expected shape; the message says why."""


class NotLoggedIn(ConfigProblem):
    """There is no profile of that name, no default one, or it holds no session: the operator must log in."""


@dataclass
class Profile:
    """One controller the operator talks to.

    Attributes:
        name: the profile's name (``--name`` at login, ``--controller`` on every verb).
        url: the controller's address, ``https://host:port``.
        ca: path of the PEM bundle of CAs trusted for this controller; None for the system's trust store.
        token: the current API session's token; None when logged out.
        username: who logged in with a password, shown by ``tollgate login`` status lines.
        cert: path of the client certificate of a certificate login.
        key: path of that certificate's private key.
    """

    name: str
    url: str
    ca: str | None = None
    token: str | None = None
    username: str | None = None
    cert: str | None = None
    key: str | None = None

    @property
    def verify(self) -> str | bool:
        """What :class:`controller.admin.admin_client.AdminClient` takes as ``verify``."""
        return self.ca if self.ca is not None else True

    @property
    def client_cert(self) -> tuple[str, str] | None:
        """The ``(certificate, key)`` pair presented to the controller, or None."""
        return (self.cert, self.key) if self.cert is not None and self.key is not None else None


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the configuration lives: ``$TOLLGATE_CONFIG``, else ``~/.config/tollgate/cli.yaml``."""
    env = os.environ if environ is None else environ
    explicit = env.get("TOLLGATE_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    return Path("~/.config/tollgate/cli.yaml").expanduser()


def _profile_from(name: str, raw: Any) -> Profile:
    if not isinstance(raw, dict) or not isinstance(raw.get("url"), str):
        raise ConfigProblem(f"controller {name!r} in the configuration has no url")
    known = {key: raw.get(key) for key in ("ca", "token", "username", "cert", "key")}
    for key, value in known.items():
        if value is not None and not isinstance(value, str):
            raise ConfigProblem(f"controller {name!r}: {key} must be a string")
    return Profile(name=name, url=raw["url"], **known)


@dataclass
class Config:
    """The profiles of one configuration file and which one verbs use when ``--controller`` is not given.

    Attributes:
        path: the file this configuration was read from and is saved to.
        profiles: the profiles by name.
        default: the name of the default profile, or None when there is none.
    """

    path: Path
    profiles: dict[str, Profile] = field(default_factory=dict)
    default: str | None = None

    @classmethod
    def load(cls, path: Path) -> Config:
        """Read the file at ``path``; a missing file is an empty configuration.

        Raises:
            ConfigProblem: the file is not YAML or not a configuration.
        """
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(path)
        except OSError as exc:
            raise ConfigProblem(f"cannot read {path}: {exc.strerror}") from exc
        try:
            raw = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigProblem(f"{path} is not valid YAML") from exc
        controllers = raw.get("controllers") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or not isinstance(controllers or {}, dict):
            raise ConfigProblem(f"{path} is not a tollgate CLI configuration")
        profiles = {str(name): _profile_from(str(name), value) for name, value in (controllers or {}).items()}
        default = raw.get("default")
        return cls(path, profiles, str(default) if default is not None else None)

    def save(self) -> None:
        """Write the configuration with mode 0600 (its directory 0700 when created), replacing the file at once."""
        self.path.parent.mkdir(mode=_DIRECTORY_MODE, parents=True, exist_ok=True)
        controllers = {name: {key: value for key, value in asdict(profile).items() if key != "name" and value}
                       for name, profile in sorted(self.profiles.items())}
        text = yaml.safe_dump({"default": self.default, "controllers": controllers}, sort_keys=False)
        # A new file of a name nobody can have planted (mkstemp: O_EXCL, mode 0600), renamed over the old one.
        descriptor, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
                os.fchmod(stream.fileno(), _FILE_MODE)
                stream.write(text)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    def profile(self, name: str | None) -> Profile:
        """The profile called ``name``, or the default one when ``name`` is None.

        Raises:
            NotLoggedIn: there is no such profile (or no default), so the operator must log in first.
        """
        chosen = name if name is not None else self.default
        if chosen is None or chosen not in self.profiles:
            which = f"controller {chosen!r}" if chosen is not None else "any controller"
            raise NotLoggedIn(f"not logged in to {which}: run `tollgate login URL` first")
        return self.profiles[chosen]

    def put(self, profile: Profile, *, make_default: bool) -> None:
        """Add or replace a profile; it becomes the default when asked or when there is no default yet.

        Raises:
            ConfigProblem: the profile's name is not a valid name.
        """
        if not PROFILE_NAME.fullmatch(profile.name):
            raise ConfigProblem(f"invalid controller name {profile.name!r}: use letters, digits, '.', '_' and '-'")
        self.profiles[profile.name] = profile
        if make_default or self.default is None or self.default not in self.profiles:
            self.default = profile.name

    def ca_path(self, name: str) -> Path:
        """Where the CA bundle confirmed for profile ``name`` is kept."""
        return self.path.parent / "ca" / f"{name}.pem"

    def write_ca(self, name: str, pem: bytes) -> Path:
        """Keep the CA bundle of profile ``name`` beside the configuration; returns its path."""
        target = self.ca_path(name)
        self.path.parent.mkdir(mode=_DIRECTORY_MODE, parents=True, exist_ok=True)
        target.parent.mkdir(mode=_DIRECTORY_MODE, exist_ok=True)
        target.write_bytes(pem)
        return target
