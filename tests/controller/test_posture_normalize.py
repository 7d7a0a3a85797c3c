"""Posture-check bodies: aliases, validation and the stored form."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.check_types.bodies import apply_aliases, canonical_mac, clean_hex, normalize_check
from controller.errors import FieldError

SHA256 = "ab" * 32
SHA256_UPPER = "AB" * 32
SHA1 = "cd" * 20
SHA1_UPPER = "CD" * 20


def _field_error(body: dict[str, Any], type_id: str, *, partial: bool = False) -> FieldError:
    with pytest.raises(FieldError) as caught:
        normalize_check(body, type_id, partial=partial)
    assert caught.value.code == "COULD_NOT_VALIDATE"
    return caught.value


# --- common behaviour --------------------------------------------------------------------------------------------


def test_common_fields_pass_through_and_input_is_not_mutated() -> None:
    body = {
        "name": "os",
        "typeId": "OS",
        "roleAttributes": ["a"],
        "tags": {"k": "v"},
        "operatingSystems": [{"type": "WINDOWS", "versions": [">=10.0.0"]}],
    }
    before = copy.deepcopy(body)
    out = normalize_check(body, "OS", partial=False)
    assert body == before
    assert out == {
        "name": "os",
        "typeId": "OS",
        "roleAttributes": ["a"],
        "tags": {"k": "v"},
        "operatingSystems": [{"type": "Windows", "versions": [">=10.0.0"]}],
    }


def test_unknown_type() -> None:
    error = _field_error({"name": "x"}, "NOPE")
    assert error.cause == {
        "field": "typeId",
        "reason": "must be one of OS, MAC, MFA, PROCESS, PROCESS_MULTI, DOMAIN",
        "value": "NOPE",
    }


@pytest.mark.parametrize(
    ("type_id", "field"),
    [("OS", "operatingSystems"), ("MAC", "macAddresses"), ("DOMAIN", "domains"), ("PROCESS", "process"),
     ("PROCESS_MULTI", "semantic")],
)
def test_required_fields_on_create(type_id: str, field: str) -> None:
    error = _field_error({"name": "x"}, type_id)
    assert (error.field, error.reason) == (field, "is required")


@pytest.mark.parametrize(
    ("type_id", "body"),
    [
        ("OS", {"typeId": "OS", "tags": {"a": "b"}}),
        ("MAC", {"typeId": "MAC", "name": "n"}),
        ("DOMAIN", {"typeId": "DOMAIN"}),
        ("PROCESS", {"typeId": "PROCESS"}),
        ("PROCESS_MULTI", {"typeId": "PROCESS_MULTI"}),
        ("MFA", {"typeId": "MFA"}),
    ],
)
def test_partial_touches_only_present_fields(type_id: str, body: dict[str, Any]) -> None:
    assert normalize_check(body, type_id, partial=True) == body


def test_partial_drops_json_nulls_of_type_fields() -> None:
    body = {"typeId": "MFA", "timeoutSeconds": None, "promptOnWake": None, "promptOnUnlock": True}
    assert normalize_check(body, "MFA", partial=True) == {"typeId": "MFA", "promptOnUnlock": True}


# --- OS -----------------------------------------------------------------------------------------------------------


def test_os_entries_deduplicated_last_wins_and_sorted_by_type() -> None:
    body = {
        "operatingSystems": [
            {"type": "macOS", "versions": ["1.x"]},
            {"type": "Windows", "versions": [">=10.0.0"]},
            {"type": "iOS", "versions": []},
            {"type": "WindowsServer", "versions": []},
            {"type": "Linux", "versions": []},
            {"type": "Windows", "versions": [">=11.0.0", "10.0.x"]},
            {"type": "Android"},
        ]
    }
    out = normalize_check(body, "OS", partial=False)
    assert out["operatingSystems"] == [
        {"type": "Android", "versions": []},
        {"type": "Linux", "versions": []},
        {"type": "Windows", "versions": [">=11.0.0", "10.0.x"]},
        {"type": "WindowsServer", "versions": []},
        {"type": "iOS", "versions": []},
        {"type": "macOS", "versions": ["1.x"]},
    ]


@pytest.mark.parametrize(
    ("given", "stored"),
    [("WINDOWS", "Windows"), ("windowsserver", "WindowsServer"), ("LINUX", "Linux"), ("ANDROID", "Android"),
     ("IOS", "iOS"), ("MACOS", "macOS"), ("Linux", "Linux")],
)
def test_os_type_spellings(given: str, stored: str) -> None:
    out = normalize_check({"operatingSystems": [{"type": given, "versions": []}]}, "OS", partial=False)
    assert out["operatingSystems"] == [{"type": stored, "versions": []}]


def test_os_duplicate_types_in_different_spellings_collapse() -> None:
    body = {"operatingSystems": [{"type": "WINDOWS", "versions": ["1.x"]}, {"type": "Windows", "versions": ["2.x"]}]}
    assert normalize_check(body, "OS", partial=True)["operatingSystems"] == [{"type": "Windows", "versions": ["2.x"]}]


@pytest.mark.parametrize(
    ("versions", "field", "value"),
    [
        ([""], "operatingSystems[1].versions[0]", ""),
        ([">=1.0.0", ">=10.0"], "operatingSystems[1].versions[1]", ">=10.0"),
        ([">=1.0.0", "1.0.0 ||"], "operatingSystems[1].versions[1]", "1.0.0 ||"),
        (["x"], "operatingSystems[1].versions[0]", "x"),
    ],
)
def test_os_invalid_ranges(versions: list[str], field: str, value: str) -> None:
    body = {"operatingSystems": [{"type": "Linux", "versions": []}, {"type": "Windows", "versions": versions}]}
    error = _field_error(body, "OS")
    assert (error.field, error.value) == (field, value)


def test_os_invalid_range_reason() -> None:
    error = _field_error({"operatingSystems": [{"type": "Windows", "versions": [""]}]}, "OS")
    assert error.cause == {"field": "operatingSystems[0].versions[0]", "reason": "empty version range", "value": ""}


def test_os_unknown_type() -> None:
    error = _field_error({"operatingSystems": [{"type": "Plan9", "versions": []}]}, "OS", partial=True)
    assert error.cause == {
        "field": "operatingSystems[0].type",
        "reason": "must be one of Windows, WindowsServer, Android, iOS, Linux, macOS",
        "value": "Plan9",
    }


def test_os_empty_list() -> None:
    error = _field_error({"operatingSystems": []}, "OS")
    assert (error.field, error.reason) == ("operatingSystems", "must contain at least one entry")


# --- MAC ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("aa-bb-cc-dd-ee-ff", "aa-bb-cc-dd-ee-ff"),
        ("AA-BB-CC-DD-EE-FF", "aa-bb-cc-dd-ee-ff"),
        ("AA:bb:CC:dd:EE:ff", "aa-bb-cc-dd-ee-ff"),
        ("aabbccddeeff", "aa-bb-cc-dd-ee-ff"),
        ("00163E5A1B2C", "00-16-3e-5a-1b-2c"),
        (" 00:16:3e:5a:1b:2c ", "00-16-3e-5a-1b-2c"),
    ],
)
def test_mac_canonical_form(given: str, stored: str) -> None:
    assert canonical_mac(given) == stored
    out = normalize_check({"macAddresses": ["01-02-03-04-05-06", given]}, "MAC", partial=False)
    assert out["macAddresses"] == ["01-02-03-04-05-06", stored]


@pytest.mark.parametrize(
    "given",
    ["", "aa-bb-cc-dd-ee", "aa-bb-cc-dd-ee-ff-00", "aa-bb:cc-dd-ee-ff", "aabb.ccdd.eeff", "gg-bb-cc-dd-ee-ff",
     "aabbccddeef", "a-bb-cc-dd-ee-fff", "aa bb cc dd ee ff", "aa--bb-cc-dd-ee-ff"],
)
def test_mac_invalid(given: str) -> None:
    assert canonical_mac(given) is None
    error = _field_error({"macAddresses": ["aa-bb-cc-dd-ee-ff", "aabbccddeeff", given]}, "MAC")
    assert error.cause == {
        "field": "macAddresses[2]",
        "reason": "must be a 48-bit MAC address such as aa-bb-cc-dd-ee-ff",
        "value": given,
    }


def test_mac_empty_list() -> None:
    error = _field_error({"macAddresses": []}, "MAC", partial=True)
    assert error.field == "macAddresses"


# --- DOMAIN -------------------------------------------------------------------------------------------------------


def test_domains_kept_as_entered() -> None:
    out = normalize_check({"name": "d", "domains": ["Corp.Example", "lab"]}, "DOMAIN", partial=False)
    assert out == {"name": "d", "domains": ["Corp.Example", "lab"]}


def test_domain_alias_mac_addresses() -> None:
    out = normalize_check({"name": "d", "macAddresses": ["corp"]}, "DOMAIN", partial=False)
    assert out == {"name": "d", "domains": ["corp"]}
    assert normalize_check({"macAddresses": ["corp"]}, "DOMAIN", partial=True) == {"domains": ["corp"]}


def test_domain_alias_same_value_twice_is_fine() -> None:
    assert normalize_check({"domains": ["a"], "macAddresses": ["a"]}, "DOMAIN", partial=False) == {"domains": ["a"]}


def test_domain_alias_conflict() -> None:
    error = _field_error({"domains": ["a"], "macAddresses": ["b"]}, "DOMAIN")
    assert (error.field, error.value) == ("macAddresses", ["b"])


@pytest.mark.parametrize(
    ("domains", "field", "reason"),
    [
        ([], "domains", "must contain at least one entry"),
        (["a", ""], "domains[1]", "must be a non-empty string"),
        ("corp", "domains", "must be an array"),
    ],
)
def test_domain_invalid(domains: Any, field: str, reason: str) -> None:
    error = _field_error({"domains": domains}, "DOMAIN", partial=True)
    assert (error.field, error.reason) == (field, reason)


# --- PROCESS ------------------------------------------------------------------------------------------------------


def test_process_stored_form() -> None:
    process = {"osType": "Windows", "path": "C:\\a.exe", "hashes": [SHA256_UPPER], "signerFingerprint": SHA1_UPPER}
    body = {"process": process}
    assert normalize_check(body, "PROCESS", partial=False) == {
        "process": {"osType": "Windows", "path": "C:\\a.exe", "hashes": [SHA256], "signerFingerprint": SHA1}
    }


def test_process_defaults_and_os_alias() -> None:
    body = {"process": {"os": "LINUX", "path": "/usr/bin/x"}}
    assert normalize_check(body, "PROCESS", partial=True) == {
        "process": {"osType": "Linux", "path": "/usr/bin/x", "hashes": [], "signerFingerprint": ""}
    }


@pytest.mark.parametrize(
    ("process", "field", "reason"),
    [
        ({"osType": "Linux", "path": ""}, "process.path", "must be a non-empty string"),
        ({"osType": "Linux"}, "process.path", "must be a non-empty string"),
        ({"osType": "Plan9", "path": "/x"}, "process.osType",
         "must be one of Windows, WindowsServer, Android, iOS, Linux, macOS"),
        ({"osType": "Linux", "path": "/x", "hashes": [SHA256, "ab" * 31]}, "process.hashes[1]",
         "must be a sha256 hash of 64 hexadecimal digits"),
        ({"osType": "Linux", "path": "/x", "hashes": ["zz" * 32]}, "process.hashes[0]",
         "must be a sha256 hash of 64 hexadecimal digits"),
        ({"osType": "Linux", "path": "/x", "signerFingerprint": "cd" * 21}, "process.signerFingerprint",
         "must be a sha1 fingerprint of 40 hexadecimal digits"),
        ({"osType": "Linux", "path": "/x", "signerFingerprint": ":".join(["cd"] * 20)}, "process.signerFingerprint",
         "must be a sha1 fingerprint of 40 hexadecimal digits"),
        ({"os": "Linux", "osType": "Windows", "path": "/x"}, "process.os",
         "conflicts with osType; send only one of os and osType"),
    ],
)
def test_process_invalid(process: dict[str, Any], field: str, reason: str) -> None:
    error = _field_error({"process": process}, "PROCESS")
    assert (error.field, error.reason) == (field, reason)


# --- PROCESS_MULTI ------------------------------------------------------------------------------------------------


def test_process_multi_stored_form_and_aliases() -> None:
    body = {
        "name": "pm",
        "semantic": "OneOf",
        "processes": [
            {"os": "WINDOWS", "path": "C:\\a.exe", "hashes": [SHA256_UPPER], "signerFingerprints": [SHA1_UPPER, SHA1]},
            {"osType": "Linux", "path": "/usr/bin/b"},
        ],
    }
    assert normalize_check(body, "PROCESS_MULTI", partial=False) == {
        "name": "pm",
        "semantic": "AnyOf",
        "processes": [
            {"osType": "Windows", "path": "C:\\a.exe", "hashes": [SHA256], "signerFingerprints": [SHA1, SHA1]},
            {"osType": "Linux", "path": "/usr/bin/b", "hashes": [], "signerFingerprints": []},
        ],
    }


@pytest.mark.parametrize(("given", "stored"), [("AllOf", "AllOf"), ("AnyOf", "AnyOf"), ("OneOf", "AnyOf")])
def test_process_multi_semantic(given: str, stored: str) -> None:
    assert normalize_check({"semantic": given}, "PROCESS_MULTI", partial=True) == {"semantic": stored}


def test_process_multi_alias_same_os_twice_is_fine() -> None:
    body = {"semantic": "AllOf", "processes": [{"os": "Linux", "osType": "LINUX", "path": "/x"}]}
    out = normalize_check(body, "PROCESS_MULTI", partial=False)
    assert out["processes"] == [{"osType": "Linux", "path": "/x", "hashes": [], "signerFingerprints": []}]


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"semantic": "AllOf"}, "processes", "is required"),
        ({"semantic": "AllOf", "processes": []}, "processes", "must contain at least one entry"),
        ({"semantic": "Some", "processes": [{"osType": "Linux", "path": "/x"}]}, "semantic", "must be AllOf or AnyOf"),
        ({"semantic": "AllOf", "processes": [{"osType": "Linux", "path": "/x"}, {"osType": "Linux", "path": ""}]},
         "processes[1].path", "must be a non-empty string"),
        ({"semantic": "AllOf", "processes": [{"osType": "Linux"}]}, "processes[0].path", "must be a non-empty string"),
        ({"semantic": "AllOf", "processes": [{"osType": "Linux", "path": "/x", "hashes": [SHA256, SHA1]}]},
         "processes[0].hashes[1]", "must be a sha256 hash of 64 hexadecimal digits"),
        ({"semantic": "AllOf", "processes": [{"osType": "Linux", "path": "/x", "signerFingerprints": [SHA1, SHA256]}]},
         "processes[0].signerFingerprints[1]", "must be a sha1 fingerprint of 40 hexadecimal digits"),
        ({"semantic": "AllOf", "processes": [{"osType": "Linux", "path": "/y"}, {"os": "Linux", "osType": "macOS"}]},
         "processes[1].os", "conflicts with osType; send only one of os and osType"),
    ],
)
def test_process_multi_invalid(body: dict[str, Any], field: str, reason: str) -> None:
    error = _field_error(body, "PROCESS_MULTI")
    assert (error.field, error.reason) == (field, reason)


# --- MFA ----------------------------------------------------------------------------------------------------------


def test_mfa_defaults_on_create() -> None:
    assert normalize_check({"name": "m"}, "MFA", partial=False) == {
        "name": "m",
        "timeoutSeconds": -1,
        "promptOnWake": False,
        "promptOnUnlock": False,
        "ignoreLegacyEndpoints": False,
    }


@pytest.mark.parametrize(("given", "stored"), [(0, -1), (-1, -1), (-30, -1), (1, 1), (600, 600), (30.0, 30)])
def test_mfa_timeout_seconds(given: Any, stored: int) -> None:
    assert normalize_check({"timeoutSeconds": given}, "MFA", partial=True) == {"timeoutSeconds": stored}
    assert normalize_check({"timeoutSeconds": given}, "MFA", partial=False)["timeoutSeconds"] == stored


def test_mfa_keeps_given_flags() -> None:
    body = {"timeoutSeconds": 30, "promptOnWake": True, "promptOnUnlock": True, "ignoreLegacyEndpoints": True}
    assert normalize_check(body, "MFA", partial=False) == body


def test_mfa_patch_keeps_absent_flags_absent() -> None:
    body = {"typeId": "MFA", "promptOnUnlock": False, "timeoutSeconds": 30}
    assert normalize_check(body, "MFA", partial=True) == body


@pytest.mark.parametrize(
    ("body", "field"),
    [({"timeoutSeconds": "30"}, "timeoutSeconds"), ({"timeoutSeconds": True}, "timeoutSeconds"),
     ({"promptOnWake": "yes"}, "promptOnWake")],
)
def test_mfa_invalid(body: dict[str, Any], field: str) -> None:
    assert _field_error(body, "MFA").field == field


# --- helpers ------------------------------------------------------------------------------------------------------


def test_apply_aliases_before_schema_validation() -> None:
    assert apply_aliases({"macAddresses": ["corp"]}, "DOMAIN") == {"domains": ["corp"]}
    assert apply_aliases({"semantic": "OneOf", "processes": [{"os": "WINDOWS", "path": "p"}]}, "PROCESS_MULTI") == {
        "semantic": "AnyOf",
        "processes": [{"osType": "Windows", "path": "p"}],
    }
    assert apply_aliases({"operatingSystems": [{"type": "LINUX", "versions": []}, {"versions": []}]}, "OS") == {
        "operatingSystems": [{"type": "Linux", "versions": []}, {"versions": []}]
    }
    # MAC checks keep their macAddresses; values of the wrong shape are left for the schema to reject.
    assert apply_aliases({"macAddresses": ["x"]}, "MAC") == {"macAddresses": ["x"]}
    assert apply_aliases({"semantic": 3, "processes": "p"}, "PROCESS_MULTI") == {"semantic": 3, "processes": "p"}
    assert apply_aliases({"operatingSystems": [{"type": "Plan9"}]}, "OS") == {"operatingSystems": [{"type": "Plan9"}]}


@pytest.mark.parametrize(("given", "cleaned"), [("AB:CD:EF", "abcdef"), ("ab cd", "abcd"), ("xyz", ""), ("", "")])
def test_clean_hex(given: str, cleaned: str) -> None:
    assert clean_hex(given) == cleaned
