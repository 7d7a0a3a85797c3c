"""``tollgate login``, ``logout``, ``controllers`` and ``use``: sessions and the saved controllers they belong to.

Trust comes first: a controller's TLS certificate is checked against a CA bundle kept for that controller, either
given (``--ca FILE``) or fetched from its ``/.well-known/est/cacerts`` on the first login and accepted only once the
operator has compared its SHA-256 fingerprints (``--yes`` accepts without asking).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from urllib.parse import urlsplit

import click
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs7

from controller.admin.admin_client import AdminClient, AdminError, ConnectionProblem, controller_root
from controller.admin.config import DEFAULT_PROFILE, PROFILE_NAME, Config, Profile, config_path
from controller.admin.invocation import State, output_options, pass_state
from controller.admin.output import Format, dump, table

__all__ = ["controllers", "fetch_ca_bundle", "fingerprint", "login", "logout", "use"]

_CACERTS = "/.well-known/est/cacerts"


def fingerprint(certificate: x509.Certificate) -> str:
    """The SHA-256 fingerprint of a certificate's DER, as colon-separated upper-case hex pairs."""
    return certificate.fingerprint(hashes.SHA256()).hex(":").upper()


def fetch_ca_bundle(url: str) -> list[x509.Certificate]:
    """The CA certificates a controller publishes at ``/.well-known/est/cacerts`` (base64 of a DER PKCS#7).

    The bundle is fetched without verifying the controller's certificate: it is what the certificate is then
    verified against, once the operator has accepted its fingerprints.

    Raises:
        ConnectionProblem: the controller cannot be reached or does not answer with a CA bundle.
        AdminError: the controller answered with an error status.
    """
    with AdminClient(url, token=None, verify=False) as client:
        response = client.send("GET", _CACERTS, headers={"Accept": "application/pkcs7-mime"})
    try:
        certificates = pkcs7.load_der_pkcs7_certificates(base64.b64decode(response.content))
    except ValueError as exc:
        raise ConnectionProblem(f"{controller_root(url)}{_CACERTS} is not a CA bundle") from exc
    if not certificates:
        raise ConnectionProblem(f"{controller_root(url)}{_CACERTS} holds no certificate")
    return certificates


def _accept(url: str, certificates: list[x509.Certificate], *, assume_yes: bool) -> None:
    click.echo(f"The controller at {url} presents this CA bundle:", err=True)
    for certificate in certificates:
        click.echo(f"  {certificate.subject.rfc4514_string()}\n    SHA-256 {fingerprint(certificate)}", err=True)
    if assume_yes:
        return
    try:
        accepted = click.confirm("Trust it for this controller?", default=False, err=True)
    except click.Abort:  # no answer (end of input)
        accepted = False
    if not accepted:
        raise ConnectionProblem("the controller's CA bundle was not accepted; compare its fingerprint or use --ca FILE")


def _candidate_ca(config: Config, name: str, url: str, given: Path | None, *, assume_yes: bool) -> Path | None:
    """The CA bundle to verify the controller with, written beside the final one until the login succeeds; None
    when the controller speaks plain HTTP or the bundle already kept for this controller is reused."""
    if urlsplit(url).scheme == "http":
        return None
    previous = config.profiles.get(name)
    if given is None and previous is not None and previous.url == url and previous.ca is not None \
            and Path(previous.ca).exists():
        return None
    if given is not None:
        pem = given.read_bytes()
    else:
        certificates = fetch_ca_bundle(url)
        _accept(url, certificates, assume_yes=assume_yes)
        pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates)
    return config.write_ca(f"{name}.new", pem)


_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


@click.command()
@click.argument("url")
@click.option("--name", metavar="NAME", help="save this controller under NAME (the --controller name, or default)")
@click.option("-u", "--username", help="username (prompted when neither it nor --cert is given)")
@click.option("-p", "--password", envvar="TOLLGATE_PASSWORD", help="password (prompted; or $TOLLGATE_PASSWORD)")
@click.option("--cert", type=_FILE, help="log in with this client certificate (PEM) instead of a password")
@click.option("--key", type=_FILE, help="the private key of --cert (PEM)")
@click.option("--ca", type=_FILE, help="trust this CA bundle (PEM) instead of fetching the controller's")
@click.option("--yes", "assume_yes", is_flag=True, help="accept the fetched CA bundle without asking")
@click.option("--default", "make_default", is_flag=True, help="make this the default controller")
@click.option("--insecure-http", is_flag=True,
              help="allow a plain http:// URL to a host other than this one (credentials travel in clear text)")
@pass_state
def login(state: State, url: str, name: str | None, username: str | None, password: str | None, cert: Path | None,
          key: Path | None, ca: Path | None, assume_yes: bool, make_default: bool, insecure_http: bool) -> None:
    """Log in to the controller at URL (https://HOST:PORT) and keep the session.

    The session token goes into the configuration file ($TOLLGATE_CONFIG or ~/.config/tollgate/cli.yaml, mode
    0600). On the first login to a controller its CA bundle is fetched and its SHA-256 fingerprint shown for you to
    accept (or give --ca FILE).
    """
    if (cert is None) != (key is None):
        raise click.UsageError("--cert and --key go together")
    if cert is not None and (username or password):
        raise click.UsageError("log in with a password or with a certificate, not both")
    root = controller_root(url)
    parts = urlsplit(root)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise click.BadParameter("expected https://HOST:PORT", param_hint="URL")
    if parts.scheme == "http" and not insecure_http and parts.hostname not in _LOOPBACK:
        # The password and then the session token would cross the network unencrypted.
        raise click.BadParameter("plain http is only for this host (localhost); use https, or --insecure-http",
                                 param_hint="URL")
    config = Config.load(config_path())
    profile_name = name or state.controller or DEFAULT_PROFILE
    if not PROFILE_NAME.fullmatch(profile_name):
        raise click.BadParameter("use letters, digits, '.', '_' and '-'", param_hint="--name")
    previous = config.profiles.get(profile_name)
    candidate = _candidate_ca(config, profile_name, root, ca, assume_yes=assume_yes)
    ca_path = str(candidate) if candidate is not None else (previous.ca if previous and previous.url == root
                                                               else None)
    client_cert = (str(cert.resolve()), str(key.resolve())) if cert is not None and key is not None else None
    if client_cert is None:
        username = username or click.prompt("Username", default=previous.username if previous else None, err=True)
        password = password or click.prompt("Password", hide_input=True, err=True)
    try:
        with AdminClient(root, token=None, verify=ca_path if ca_path else True, cert=client_cert) as client:
            if client_cert is not None:
                token = client.authenticate_certificate()
            else:
                token = client.authenticate_password(str(username), str(password))
    except BaseException:
        if candidate is not None:
            candidate.unlink(missing_ok=True)
        raise
    if candidate is not None:
        kept = config.ca_path(profile_name)
        os.replace(candidate, kept)
        ca_path = str(kept)
    profile = Profile(profile_name, root, ca=ca_path, token=token, username=username if client_cert is None else None,
                      cert=client_cert[0] if client_cert else None, key=client_cert[1] if client_cert else None)
    config.put(profile, make_default=make_default)
    config.save()
    who = f"as {username}" if client_cert is None else f"with the certificate {client_cert[0]}"
    marker = " (default)" if config.default == profile_name else ""
    click.echo(f"logged in to {root} {who}; saved as controller {profile_name!r}{marker}")


@click.command()
@pass_state
def logout(state: State) -> None:
    """End the current session on the controller and forget its token."""
    config = Config.load(config_path())
    profile = config.profile(state.controller)
    if profile.token:
        try:
            with AdminClient.from_profile(profile) as client:
                client.logout()
        except AdminError as error:
            if error.status != 401:  # a session that already ended is as good as ended
                raise
        profile.token = None
        config.save()
    click.echo(f"logged out of controller {profile.name!r} ({profile.url})")


@click.command()
@output_options
def controllers(output: str) -> None:
    """List the saved controllers: name, URL, who logged in, whether a session is kept; * marks the default."""
    config = Config.load(config_path())
    rows = [{"default": "*" if name == config.default else "", "name": name, "url": profile.url,
             "user": profile.username or (f"cert {Path(profile.cert).name}" if profile.cert else None),
             "session": profile.token is not None}
            for name, profile in sorted(config.profiles.items())]
    chosen = Format(output)
    if chosen is not Format.TEXT:
        click.echo(dump(rows, chosen))
    elif rows:
        click.echo(table(rows, (("", "default"), ("name", "name"), ("url", "url"), ("user", "user"),
                                ("session", "session"))))


@click.command()
@click.argument("name")
def use(name: str) -> None:
    """Make the saved controller NAME the default one."""
    config = Config.load(config_path())
    if name not in config.profiles:
        raise click.BadParameter(f"no saved controller {name!r} (see tollgate controllers)", param_hint="NAME")
    config.default = name
    config.save()
    click.echo(f"controller {name!r} is now the default")
