"""A synchronous client for the Management API, as the admin CLI and its ``apply``/``export`` verbs use it.

The CLI is a short-lived program of its own, not part of the Trio controller, so it talks HTTP with httpx's blocking
client. Every answer is unwrapped from the ``{"data":…,"meta":…}`` envelope; every error envelope becomes an
:class:`AdminError`, and every failure to reach the controller (refused connection, TLS, timeout) a
:class:`ConnectionProblem`.
"""

from __future__ import annotations

import builtins
import ssl
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

if TYPE_CHECKING:
    from controller.admin.config import Profile

__all__ = ["MANAGEMENT_PATH", "PAGE_SIZE", "AdminClient", "AdminError", "ConnectionProblem", "controller_root",
           "tls_context"]

MANAGEMENT_PATH = "/edge/management/v1"
PAGE_SIZE = 500
"""The largest page the API answers (its ``limit`` maximum): ``list_all`` pages with it."""
_TIMEOUT = httpx.Timeout(30.0)


class AdminError(Exception):
    """The controller answered with an error.

    Attributes:
        status: the HTTP status.
        code: the API's error code (``NOT_FOUND``, ``COULD_NOT_VALIDATE``...), or ``HTTP_<status>`` when the answer
            was not an error envelope.
        message: the API's message, or the start of the body when it was not an error envelope.
        cause: the envelope's ``cause`` (a field cause ``{field, reason, value}``, a nested ``{code, message}``...)
            or None.
    """

    def __init__(self, status: int, code: str, message: str, cause: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.cause = cause


class ConnectionProblem(Exception):
    """The controller could not be reached or its TLS identity could not be verified; the message says which."""


def controller_root(url: str) -> str:
    """The controller's address from a URL an operator typed: no trailing slash, no Management API path.

    Args:
        url: ``https://host:port``, optionally followed by ``/`` or ``/edge/management/v1``.

    Returns:
        ``scheme://host:port`` (plus any other path prefix the URL had).
    """
    root = url.strip().rstrip("/")
    if root.endswith(MANAGEMENT_PATH):
        root = root[: -len(MANAGEMENT_PATH)]
    return root


def tls_context(verify: str | bool, cert: tuple[str, str] | None = None) -> ssl.SSLContext:
    """The TLS settings of a connection to the controller.

    Args:
        verify: the path of a PEM bundle of trusted CAs, True for the system's trust store, False to trust anything
            (only for fetching the CA bundle whose fingerprint the operator then confirms).
        cert: paths of a client certificate (PEM, optionally with its chain) and its private key, presented on every
            connection.

    Returns:
        The SSL context.

    Raises:
        ConnectionProblem: a file cannot be read or does not hold what it should.
    """
    try:
        if verify is False:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif verify is True:
            context = ssl.create_default_context()
        else:
            context = ssl.create_default_context(cafile=verify)
        if cert is not None:
            context.load_cert_chain(cert[0], cert[1])
    except (OSError, ssl.SSLError) as exc:
        raise ConnectionProblem(f"cannot load TLS files: {exc}") from exc
    return context


def _item(kind: str, id: str) -> str:
    """The path of one row; the id is escaped so that a name tried as an id stays one path segment."""
    return f"{kind}/{quote(id, safe='')}"


def _envelope(response: httpx.Response) -> dict[str, Any]:
    """The JSON envelope of a successful answer; an empty body is an envelope without data."""
    if not response.content:
        return {}
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise AdminError(response.status_code, f"HTTP_{response.status_code}", "the answer is not a JSON envelope")
    return body


def _error_from(response: httpx.Response) -> AdminError:
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        return AdminError(response.status_code, error["code"], str(error.get("message", "")), error.get("cause"))
    text = " ".join(response.text.split())[:200] or response.reason_phrase
    return AdminError(response.status_code, f"HTTP_{response.status_code}", text)


class AdminClient:
    """The Management API of one controller, as one operator's session sees it.

    Args:
        base_url: the controller's address (``https://host:port``; a trailing ``/edge/management/v1`` is accepted).
            Paths given to :meth:`request` are relative to the Management API under it.
        token: the API session's token, sent as the ``zt-session`` header; None before login.
        verify: see :func:`tls_context`.
        cert: client certificate and key paths for certificate login, see :func:`tls_context`.
    """

    def __init__(self, base_url: str, *, token: str | None, verify: str | bool,
                 cert: tuple[str, str] | None = None) -> None:
        self.root = controller_root(base_url)
        self.token = token
        headers = {"zt-session": token} if token else {}
        self._http = httpx.Client(base_url=self.root, verify=tls_context(verify, cert), timeout=_TIMEOUT,
                                  headers=headers)

    @classmethod
    def from_profile(cls, profile: Profile) -> AdminClient:
        """A client for a saved controller profile: its URL, token, CA bundle and client certificate."""
        return cls(profile.url, token=profile.token, verify=profile.verify, cert=profile.client_cert)

    def close(self) -> None:
        """Close the connections; the client cannot be used afterwards."""
        self._http.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def send(self, method: str, url: str, *, params: Mapping[str, Any] | None = None, json: Any = None,
             headers: Mapping[str, str] | None = None) -> httpx.Response:
        """One request to a path under the controller's address (not the Management API), answered 2xx.

        Raises:
            AdminError: the answer's status is not 2xx.
            ConnectionProblem: the controller cannot be reached, its certificate is not trusted, or it timed out.
        """
        query = {key: value for key, value in (params or {}).items() if value is not None}
        try:
            response = self._http.request(method, url, params=query, json=json, headers=headers)
        except httpx.TransportError as exc:
            raise ConnectionProblem(f"cannot reach {self.root}: {exc}") from exc
        if not response.is_success:
            raise _error_from(response)
        return response

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None) -> Any:
        """One Management API request; the envelope's ``data``.

        Args:
            method: the HTTP method.
            path: the path under ``/edge/management/v1`` (``/identities``, ``/database/snapshot``...).
            params: query parameters; None values are left out.
            json: the JSON body, or None for none.

        Returns:
            The ``data`` of the answer's envelope (None when the answer has no JSON body).

        Raises:
            AdminError: the controller answered with an error status.
            ConnectionProblem: the controller cannot be reached or not trusted.
        """
        body = _envelope(self.send(method, MANAGEMENT_PATH + "/" + path.lstrip("/"), params=params, json=json))
        return body.get("data")

    def list(self, kind: str, *, filter: str | None = None, limit: int | None = None, offset: int | None = None,
             sort: str | None = None) -> builtins.list[dict[str, Any]]:
        """One page of a kind's list (``GET /{kind}``), with the API's own paging defaults for what is None.

        Args:
            kind: the kind's path segment (``identities``, ``service-policies``...).
            filter: a ZitiQL filter.
            limit: page size (-1 for all, up to the API's cap).
            offset: rows to skip.
            sort: the API's ``sort`` parameter (``name desc``).

        Returns:
            The rows of the page.
        """
        return self.page(kind, filter=filter, limit=limit, offset=offset, sort=sort)[0]

    def page(self, kind: str, *, filter: str | None = None, limit: int | None = None, offset: int | None = None,
             sort: str | None = None) -> tuple[builtins.list[dict[str, Any]], dict[str, Any]]:
        """One page of a kind's list, as :meth:`list`, with the answer's ``meta`` (``pagination``: ``limit``,
        ``offset``, ``totalCount``)."""
        body = _envelope(self.send("GET", f"{MANAGEMENT_PATH}/{kind}",
                                   params={"filter": filter, "limit": limit, "offset": offset, "sort": sort}))
        return list(body.get("data") or []), dict(body.get("meta") or {})

    def list_all(self, kind: str, filter: str | None = None,
                 sort: str | None = None) -> builtins.list[dict[str, Any]]:
        """Every row of a kind matching ``filter`` (in ``sort`` order), paging through the list :data:`PAGE_SIZE`
        rows at a time."""
        rows: builtins.list[dict[str, Any]] = []
        while True:
            page = self.list(kind, filter=filter, limit=PAGE_SIZE, offset=len(rows), sort=sort)
            rows.extend(page)
            if len(page) < PAGE_SIZE:
                return rows

    def get(self, kind: str, id: str) -> dict[str, Any]:
        """The detail of one row (``GET /{kind}/{id}``); raises :class:`AdminError` 404 when it does not exist."""
        data = self.request("GET", _item(kind, id))
        return dict(data or {})

    def create(self, kind: str, body: Mapping[str, Any]) -> str:
        """Create a row (``POST /{kind}``) and return its id."""
        data = self.request("POST", kind, json=dict(body))
        return str((data or {}).get("id", ""))

    def update(self, kind: str, id: str, body: Mapping[str, Any]) -> None:
        """Change the fields in ``body`` of one row (``PATCH /{kind}/{id}``); other fields keep their values."""
        self.request("PATCH", _item(kind, id), json=dict(body))

    def delete(self, kind: str, id: str) -> None:
        """Delete one row (``DELETE /{kind}/{id}``)."""
        self.request("DELETE", _item(kind, id))

    def resolve(self, kind: str, id_or_name: str) -> str:
        """The id of the row of ``kind`` whose id, or else whose name, is ``id_or_name``.

        Raises:
            AdminError: 404 ``NOT_FOUND`` when no row has that id or name.
        """
        try:
            return str(self.get(kind, id_or_name)["id"])
        except AdminError as exc:
            if exc.status != 404:
                raise
        quoted = id_or_name.replace("\\", "\\\\").replace('"', '\\"')
        try:
            rows = self.list(kind, filter=f'name = "{quoted}"', limit=2)
        except AdminError as exc:
            if exc.code != "INVALID_FILTER":  # a kind without names
                raise
            rows = []
        if len(rows) == 1:
            return str(rows[0]["id"])
        if not rows:
            raise AdminError(404, "NOT_FOUND", f"no {kind} with the id or name {id_or_name!r}")
        raise AdminError(409, "AMBIGUOUS_NAME", f"several {kind} are named {id_or_name!r}; give an id")

    def authenticate_password(self, username: str, password: str) -> str:
        """Log in with a username and password (``POST /authenticate?method=password``); the new session's token.

        The client sends the token on its later requests.
        """
        data = self.request("POST", "authenticate", params={"method": "password"},
                            json={"username": username, "password": password})
        return self._take_token(data)

    def authenticate_certificate(self) -> str:
        """Log in with the client certificate given at construction (``POST /authenticate?method=cert``)."""
        return self._take_token(self.request("POST", "authenticate", params={"method": "cert"}, json={}))

    def _take_token(self, data: Any) -> str:
        token = str((data or {}).get("token", ""))
        self.token = token
        self._http.headers["zt-session"] = token
        return token

    def stream_lines(self, path: str, *, params: Mapping[str, Any] | None = None,
                     headers: Mapping[str, str] | None = None) -> Iterator[str]:
        """The lines of a streamed Management API answer (``GET``, Server-Sent Events), as they come; the stream
        has no read timeout (the controller sends heartbeats).

        Raises:
            AdminError: the controller refused the request.
            ConnectionProblem: the controller cannot be reached, or the stream broke.
        """
        query = {key: value for key, value in (params or {}).items() if value is not None}
        timeout = httpx.Timeout(30.0, read=None)
        try:
            with self._http.stream("GET", MANAGEMENT_PATH + "/" + path.lstrip("/"), params=query,
                                   headers=dict(headers or {}), timeout=timeout) as response:
                if not response.is_success:
                    response.read()
                    raise _error_from(response)
                yield from response.iter_lines()
        except httpx.TransportError as exc:
            raise ConnectionProblem(f"the stream from {self.root} stopped: {exc}") from exc

    def logout(self) -> None:
        """End the current API session (``DELETE /current-api-session``)."""
        self.request("DELETE", "current-api-session")
