"""Business rules for posture-check request bodies: aliases, validation beyond the schema, canonical storage form.

:func:`normalize_check` turns the body of a create (POST), full update (PUT) or partial update (PATCH) of a
posture check into the dict to store. It never mutates its input. Fields that are not specific to the check's
type (``name``, ``tags``, ``roleAttributes``, ``typeId``, ...) are copied through untouched; the generic
resource layer owns them.

The admin guide's spellings are accepted on input and stored in the reference spelling (see :func:`apply_aliases`).
Because some of them are not valid against the reference schema (``semantic: "OneOf"``, a DOMAIN body carrying
``macAddresses``), a caller that validates the body against the schema must apply the aliases first;
:func:`normalize_check` applies them again, which is harmless since the rewrite is idempotent.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from controller.check_types.os_versions import validate_range
from controller.errors import FieldError

__all__ = [
    "CHECK_TYPES",
    "OS_TYPES",
    "apply_aliases",
    "canonical_mac",
    "clean_hex",
    "normalize_check",
]

CHECK_TYPES: tuple[str, ...] = ("OS", "MAC", "MFA", "PROCESS", "PROCESS_MULTI", "DOMAIN")
"""Posture check ``typeId`` values Tollgate creates and evaluates."""

OS_TYPES: tuple[str, ...] = ("Windows", "WindowsServer", "Android", "iOS", "Linux", "macOS")
"""The reference ``osType`` spellings, which are the stored ones."""

# The guide writes OS types upper-case (WINDOWS, LINUX, ...); any capitalisation of a reference spelling is read
# as that spelling, so the stored value is always one of OS_TYPES.
_OS_TYPE_ALIASES = {name.lower(): name for name in OS_TYPES}
_SEMANTIC_ALIASES = {"OneOf": "AnyOf"}
_MAC = re.compile(r"([0-9a-f]{2})([-:]?)([0-9a-f]{2})\2([0-9a-f]{2})\2([0-9a-f]{2})\2([0-9a-f]{2})\2([0-9a-f]{2})")
_NON_HEX = re.compile(r"[^0-9a-f]")
_HEX = re.compile(r"[0-9a-fA-F]+")
_SHA256_DIGITS = 64
_SHA1_DIGITS = 40


def canonical_mac(text: str) -> str | None:
    """The canonical form (``aa-bb-cc-dd-ee-ff``) of a 48-bit MAC address, or None if ``text`` is not one.

    Accepted: six hex pairs separated consistently by ``-`` or ``:``, or twelve hex digits without separators,
    in any case, with surrounding whitespace ignored. This is the one normalisation used both for the addresses
    of a MAC check and for the addresses a client reports, so that comparison is exact string equality.
    """
    found = _MAC.fullmatch(text.strip().lower())
    if found is None:
        return None
    return "-".join(found.group(1, 3, 4, 5, 6, 7))


def clean_hex(text: str) -> str:
    """Lower-case ``text`` and drop every non-hex character, as a comparison key for hashes and fingerprints.

    Clients report thumbprints in several notations (``AA:BB:..``, spaced pairs); stored check values are plain
    lower-case hex, so cleaning the reported side is enough for them to compare equal.
    """
    return _NON_HEX.sub("", text.lower())


def _os_type(value: Any) -> Any:
    return _OS_TYPE_ALIASES.get(value.lower(), value) if isinstance(value, str) else value


def _alias_process(entry: Any, field: str) -> Any:
    """Rewrite one process spec: ``os`` (guide) becomes ``osType`` (reference), OS type spelling canonicalised."""
    if not isinstance(entry, dict):
        return entry
    out = dict(entry)
    if "os" in out:
        legacy = out.pop("os")
        if "osType" in out and out["osType"] is not None and _os_type(out["osType"]) != _os_type(legacy):
            raise FieldError(f"{field}.os", "conflicts with osType; send only one of os and osType", legacy)
        if out.get("osType") is None:
            out["osType"] = legacy
    if "osType" in out:
        out["osType"] = _os_type(out["osType"])
    return out


def apply_aliases(body: dict[str, Any], type_id: str) -> dict[str, Any]:
    """A copy of ``body`` with the admin guide's spellings rewritten to the reference spellings.

    * PROCESS_MULTI ``semantic: "OneOf"`` becomes ``"AnyOf"``;
    * ``processes[].os`` (PROCESS_MULTI) and ``process.os`` (PROCESS) become ``osType``;
    * a DOMAIN body's ``macAddresses`` becomes ``domains``;
    * OS type names in any capitalisation (``WINDOWS``) become the reference spelling (``Windows``).

    Sending both spellings of one field with different values raises :class:`FieldError` on the guide's
    spelling. Values that are not of the expected shape are left for schema validation to reject.
    """
    out = dict(body)
    if type_id == "OS" and isinstance(out.get("operatingSystems"), list):
        out["operatingSystems"] = [
            {**entry, "type": _os_type(entry["type"])} if isinstance(entry, dict) and "type" in entry else entry
            for entry in out["operatingSystems"]
        ]
    elif type_id == "PROCESS" and "process" in out:
        out["process"] = _alias_process(out["process"], "process")
    elif type_id == "PROCESS_MULTI":
        semantic = out.get("semantic")
        if isinstance(semantic, str):
            out["semantic"] = _SEMANTIC_ALIASES.get(semantic, semantic)
        if isinstance(out.get("processes"), list):
            out["processes"] = [_alias_process(p, f"processes[{i}]") for i, p in enumerate(out["processes"])]
    elif type_id == "DOMAIN" and "macAddresses" in out:
        legacy = out.pop("macAddresses")
        if out.get("domains") is not None and legacy is not None and out["domains"] != legacy:
            raise FieldError("macAddresses", "conflicts with domains; send only one of the two", legacy)
        if out.get("domains") is None:
            out["domains"] = legacy
    return out


def _require_list(value: Any, field: str, *, non_empty: bool) -> list[Any]:
    if not isinstance(value, list):
        raise FieldError(field, "must be an array", value)
    if non_empty and not value:
        raise FieldError(field, "must contain at least one entry", value)
    return value


def _require_string(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise FieldError(field, "must be a non-empty string", value)
    return value


def _hex_digest(value: Any, field: str, digits: int, what: str) -> str:
    if not isinstance(value, str) or len(value) != digits or _HEX.fullmatch(value) is None:
        raise FieldError(field, f"must be a {what} of {digits} hexadecimal digits", value)
    return value.lower()


def _hashes(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    items = _require_list(value, field, non_empty=False)
    return [_hex_digest(h, f"{field}[{i}]", _SHA256_DIGITS, "sha256 hash") for i, h in enumerate(items)]


def _fingerprint(value: Any, field: str) -> str:
    return _hex_digest(value, field, _SHA1_DIGITS, "sha1 fingerprint")


def _os_type_value(value: Any, field: str) -> str:
    if value not in OS_TYPES:
        raise FieldError(field, "must be one of " + ", ".join(OS_TYPES), value)
    return str(value)


def _operating_systems(value: Any) -> list[dict[str, Any]]:
    entries = _require_list(value, "operatingSystems", non_empty=True)
    by_type: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(entries):
        field = f"operatingSystems[{i}]"
        if not isinstance(entry, dict):
            raise FieldError(field, "must be an object", entry)
        os_type = _os_type_value(entry.get("type"), f"{field}.type")
        versions = entry.get("versions")
        versions = [] if versions is None else _require_list(versions, f"{field}.versions", non_empty=False)
        for j, text in enumerate(versions):
            if not isinstance(text, str):
                raise FieldError(f"{field}.versions[{j}]", "must be a string", text)
            try:
                validate_range(text)
            except ValueError as exc:
                raise FieldError(f"{field}.versions[{j}]", str(exc), text) from None
        # Keyed by type: a repeated type replaces the earlier entry (last wins), as the reference stores them.
        by_type[os_type] = {"type": os_type, "versions": list(versions)}
    # Byte order of the reference spellings, the order the reference controller returns them in.
    return [by_type[key] for key in sorted(by_type)]


def _mac_addresses(value: Any) -> list[str]:
    entries = _require_list(value, "macAddresses", non_empty=True)
    out: list[str] = []
    for i, text in enumerate(entries):
        canonical = canonical_mac(text) if isinstance(text, str) else None
        if canonical is None:
            raise FieldError(f"macAddresses[{i}]", "must be a 48-bit MAC address such as aa-bb-cc-dd-ee-ff", text)
        out.append(canonical)
    return out


def _domains(value: Any) -> list[str]:
    entries = _require_list(value, "domains", non_empty=True)
    # Stored as entered: matching is case-insensitive, so the administrator's spelling is kept for display.
    return [_require_string(text, f"domains[{i}]") for i, text in enumerate(entries)]


def _process(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FieldError("process", "must be an object", value)
    fingerprint = value.get("signerFingerprint")
    return {
        "osType": _os_type_value(value.get("osType"), "process.osType"),
        "path": _require_string(value.get("path"), "process.path"),
        "hashes": _hashes(value.get("hashes"), "process.hashes"),
        # "" means "no signer required"; evaluation only checks a non-empty fingerprint.
        "signerFingerprint": _fingerprint(fingerprint, "process.signerFingerprint") if fingerprint else "",
    }


def _processes(value: Any) -> list[dict[str, Any]]:
    entries = _require_list(value, "processes", non_empty=True)
    out: list[dict[str, Any]] = []
    for i, entry in enumerate(entries):
        field = f"processes[{i}]"
        if not isinstance(entry, dict):
            raise FieldError(field, "must be an object", entry)
        fingerprints = entry.get("signerFingerprints")
        fingerprints = [] if fingerprints is None else _require_list(
            fingerprints, f"{field}.signerFingerprints", non_empty=False
        )
        out.append({
            "osType": _os_type_value(entry.get("osType"), f"{field}.osType"),
            "path": _require_string(entry.get("path"), f"{field}.path"),
            "hashes": _hashes(entry.get("hashes"), f"{field}.hashes"),
            "signerFingerprints": [
                _fingerprint(fp, f"{field}.signerFingerprints[{j}]") for j, fp in enumerate(fingerprints)
            ],
        })
    return out


def _semantic(value: Any) -> str:
    if value not in ("AllOf", "AnyOf"):
        raise FieldError("semantic", "must be AllOf or AnyOf", value)
    return str(value)


def _timeout_seconds(value: Any) -> int:
    if value is None:
        return -1
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON schema counts 30.0 as an integer; store it as one.
    if not isinstance(value, int) or isinstance(value, bool):
        raise FieldError("timeoutSeconds", "must be an integer", value)
    # Every non-positive timeout means "never expires"; -1 is the one stored spelling of it.
    return value if value > 0 else -1


def _flag(name: str) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise FieldError(name, "must be a boolean", value)
        return value

    return check


# Per type: field -> (validator/normaliser, required on create/full update, value stored when omitted).
_Rule = tuple[Callable[[Any], Any], bool, Callable[[], Any] | None]
_RULES: dict[str, dict[str, _Rule]] = {
    "OS": {"operatingSystems": (_operating_systems, True, None)},
    "MAC": {"macAddresses": (_mac_addresses, True, None)},
    "DOMAIN": {"domains": (_domains, True, None)},
    "PROCESS": {"process": (_process, True, None)},
    "PROCESS_MULTI": {"semantic": (_semantic, True, None), "processes": (_processes, True, None)},
    "MFA": {
        "timeoutSeconds": (_timeout_seconds, False, lambda: -1),
        "promptOnWake": (_flag("promptOnWake"), False, lambda: False),
        "promptOnUnlock": (_flag("promptOnUnlock"), False, lambda: False),
        "ignoreLegacyEndpoints": (_flag("ignoreLegacyEndpoints"), False, lambda: False),
    },
}


def normalize_check(body: dict[str, Any], type_id: str, *, partial: bool) -> dict[str, Any]:
    """The posture-check body to store for a request ``body`` of type ``type_id``; raises :class:`FieldError`.

    ``body`` is the request body, normally already validated against the reference schema. ``partial`` is True
    for PATCH: only the type's fields present (and not JSON null, which PATCH ignores) are validated and returned;
    absent fields are left out so that the stored values survive the merge. With ``partial`` False (POST, PUT)
    every type field is present in the result: required ones raise when missing, optional ones get their default.

    Per type, in the stored form:

    * OS ``operatingSystems``: every ``versions[]`` entry a valid range (see
      :func:`controller.check_types.os_versions.validate_range`; empty is invalid), missing ``versions`` stored as
      ``[]``, entries de-duplicated by ``type`` (last wins) and sorted by type;
    * MAC ``macAddresses``: 48-bit addresses stored as ``aa-bb-cc-dd-ee-ff`` (see :func:`canonical_mac`);
    * DOMAIN ``domains``: a non-empty list of non-empty strings, kept as entered;
    * PROCESS ``process {osType, path, hashes, signerFingerprint}`` and PROCESS_MULTI ``semantic`` plus
      ``processes[] {osType, path, hashes, signerFingerprints}`` (at least one): ``path`` non-empty, hashes 64 hex
      digits, fingerprints 40 hex digits, both lower-cased, missing lists ``[]``, missing fingerprint ``""``;
    * MFA: ``timeoutSeconds`` ≤ 0 or omitted stored as -1; ``promptOnWake``, ``promptOnUnlock`` and
      ``ignoreLegacyEndpoints`` default to False.

    Field names in errors are wire paths (``operatingSystems[0].versions[1]``, ``macAddresses[2]``,
    ``processes[0].hashes[1]``) indexed as sent, before de-duplication.
    """
    rules = _RULES.get(type_id)
    if rules is None:
        raise FieldError("typeId", "must be one of " + ", ".join(CHECK_TYPES), type_id)
    out = apply_aliases(body, type_id)
    for name, (normalise, required, default) in rules.items():
        value = out.get(name)
        if value is None:
            if partial:
                out.pop(name, None)
            elif required:
                raise FieldError(name, "is required", value)
            elif default is not None:
                out[name] = default()
            continue
        out[name] = normalise(value)
    return out
