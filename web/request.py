"""Request decoding shared by every route: JSON bodies and list query parameters."""

from __future__ import annotations

from typing import Any

import msgspec
from quart import request

from controller.data.listing import ListParams
from controller.errors import ApiError, field_cause, nested_cause

__all__ = ["list_params", "read_json"]

_decoder = msgspec.json.Decoder()


async def read_json(name: str = "", *, absent: Any = None) -> Any:
    """The decoded JSON body of the current request; ``absent`` when there is none (a JSON ``null`` is None).

    Args:
        name: the body parameter's name (``identity``), used in the parse error's message as the reference does.
        absent: what a request without a body reads as.

    Raises:
        ApiError: 400 COULD_NOT_VALIDATE for a body that is not JSON by its content type, 400 COULD_NOT_PARSE_BODY
            for malformed JSON (including nesting too deep to decode).
    """
    raw = await request.get_data(cache=False)
    if not raw or not raw.strip():
        return absent
    content_type = request.headers.get("Content-Type", "")
    if content_type and "json" not in content_type and "text/plain" not in content_type:
        raise ApiError("COULD_NOT_VALIDATE", field_cause("Content-Type", "unsupported content type, use "
                                                         "application/json", content_type))
    try:
        return _decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError) as exc:
        what = f"{name} body" if name else "body"
        raise ApiError("COULD_NOT_PARSE_BODY",
                       nested_cause(f'parsing {what} from "" failed, because {exc}')) from None


# Each list parameter that takes one value, and the error a second value of it gets.
_SINGLE_VALUED = {"limit": "INVALID_PAGINATION", "offset": "INVALID_PAGINATION", "filter": "INVALID_FILTER",
                  "sort": "INVALID_SORT_IDENTIFIER", "roleSemantic": "COULD_NOT_VALIDATE"}


def list_params(role_filter: bool) -> ListParams:
    """The list query parameters of the current request (roleFilter only where the operation takes it).

    Raises:
        ApiError: 400 when a parameter that takes one value is given more than once (which one would count is
            anybody's guess), with the code that parameter's other errors have.
    """
    args = request.args
    for name, code in _SINGLE_VALUED.items():
        values = args.getlist(name)
        if len(values) > 1 and (role_filter or name != "roleSemantic"):
            raise ApiError(code, field_cause(name, f"{name} may be given once", values))
    return ListParams(
        filter=args.get("filter"),
        sort=args.get("sort"),
        limit=args.get("limit"),
        offset=args.get("offset"),
        role_filter=tuple(args.getlist("roleFilter")) if role_filter else (),
        role_semantic=args.get("roleSemantic") if role_filter else None,
    )
