"""Evaluation of posture checks against posture data (OS, MAC, domain, process, multi-process) and the shared
failure entries. MFA checks are in ``tests/controller/test_posture_evaluate_mfa.py``.

Reported MAC addresses, hashes and fingerprints are normalised on receipt: data holding them is built as the
identity actor builds it, through :func:`controller.posture.machine.apply_response`."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace

from controller.posture.records import DomainRecord, MacRecord, OsRecord, PostureData, ProcessRecord, apply_response
from controller.posture.rules import CheckResult, evaluate_check, failure_entry

T0 = 1_700_000_000.0
SHA256_A = "aa" * 32
SHA256_B = "bb" * 32
SHA1_A = "11" * 20
SHA1_B = "22" * 20
EMPTY = PostureData()


def _os_check(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"id": "os1", "name": "os", "typeId": "OS", "operatingSystems": list(entries)}


def _os_data(type_: str, version: str, build: str | None = None, *, timed_out: bool = False) -> PostureData:
    return PostureData(os=OsRecord(type=type_, version=version, build=build, timed_out=timed_out))


# --- OS -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("range_text", "passing"),
    [
        (">=10.5.0 <=10.6.0", True),
        (">=10.5.19041 <=10.6.0", True),
        (">=10.0.0 <=10.5.19041", True),
        (">=10.8.0 <=10.9.0", False),
        (">10.6.0", False),
        (">=10.5.19042", False),
        (">=11.0.0", False),
        (">=1.0.0", True),
    ],
)
def test_os_reference_anchors(range_text: str, passing: bool) -> None:
    check = _os_check({"type": "Windows", "versions": [range_text]})
    assert evaluate_check(check, _os_data("Windows", "10.5.19041"), None, T0).passing is passing


@pytest.mark.parametrize("version", ["", "1.2.3", "nonsense"])
def test_os_without_versions_passes_any_version(version: str) -> None:
    check = _os_check({"type": "Windows", "versions": []})
    assert evaluate_check(check, _os_data("windows", version), None, T0).passing is True


@pytest.mark.parametrize(
    ("data", "passing"),
    [
        (_os_data("windows", "10.0", "19045"), True),
        (_os_data("WINDOWS", "10.0", "18363"), False),
        (_os_data("windows", "10.0"), False),
        (_os_data("windows", "10.0.19045.2965"), True),
        (_os_data("windows", "10.0.19045", timed_out=True), False),
        (_os_data("linux", "10.0.19045"), False),
        (_os_data("", ""), False),
        (EMPTY, False),
    ],
)
def test_os_cases(data: PostureData, passing: bool) -> None:
    check = _os_check({"type": "Windows", "versions": [">=10.0.19000"]}, {"type": "macOS", "versions": []})
    assert evaluate_check(check, data, None, T0).passing is passing


def test_os_duplicate_type_in_row_last_wins() -> None:
    check = _os_check({"type": "Windows", "versions": [">=1.0.0"]}, {"type": "WINDOWS", "versions": [">=11.0.0"]})
    assert evaluate_check(check, _os_data("windows", "10.0.0"), None, T0).passing is False


def test_os_values() -> None:
    check = _os_check({"type": "Windows", "versions": [">=11.0.0"]})
    assert evaluate_check(check, _os_data("windows", "10.0", "19045"), None, T0) == CheckResult(
        passing=False,
        actual_value={"type": "windows", "version": "10.0"},
        expected_value=[{"type": "Windows", "versions": [">=11.0.0"]}],
    )
    result = evaluate_check(check, EMPTY, None, T0)
    assert result.actual_value == {"type": "", "version": ""}


# --- MAC ----------------------------------------------------------------------------------------------------------


def _mac_check(*addresses: str) -> dict[str, Any]:
    return {"id": "mac1", "name": "mac", "typeId": "MAC", "macAddresses": list(addresses)}


def _mac_data(*reported: str) -> PostureData:
    """The data of a MAC response reporting ``reported``, as received (addresses canonicalised)."""
    data, _ = apply_response(EMPTY, {"id": "mac1", "typeId": "MAC", "macAddresses": list(reported)}, T0)
    return data


@pytest.mark.parametrize(
    ("reported", "passing"),
    [
        (("aa-bb-cc-dd-ee-ff",), True),
        (("AA:BB:CC:DD:EE:FF",), True),
        (("aabbccddeeff",), True),
        (("01-02-03-04-05-06", "AABBCCDDEEFF"), True),
        (("11-22-33-44-55-66",), False),
        (("not a mac", "aa-bb-cc-dd-ee"), False),
        ((), False),
    ],
)
def test_mac(reported: tuple[str, ...], passing: bool) -> None:
    check = _mac_check("aa-bb-cc-dd-ee-ff", "00-00-00-00-00-01")
    assert evaluate_check(check, _mac_data(*reported), None, T0).passing is passing


def test_mac_reported_addresses_are_kept_canonical() -> None:
    data = _mac_data("AA:BB:CC:DD:EE:FF", " aabbccddeeff ", "Not A Mac")
    assert data.mac is not None
    assert data.mac.addresses == ("aa-bb-cc-dd-ee-ff", "aa-bb-cc-dd-ee-ff", "not a mac")
    result = evaluate_check(_mac_check("00-00-00-00-00-01"), data, None, T0)
    assert result.actual_value == ["aa-bb-cc-dd-ee-ff", "aa-bb-cc-dd-ee-ff", "not a mac"]


def test_mac_unnormalised_row_still_compares() -> None:
    data = _mac_data("aa-bb-cc-dd-ee-ff")
    result = evaluate_check(_mac_check("AABBCCDDEEFF"), data, None, T0)
    assert result == CheckResult(True, ["aa-bb-cc-dd-ee-ff"], ["aa-bb-cc-dd-ee-ff"])


def test_mac_missing_or_timed_out() -> None:
    check = _mac_check("aa-bb-cc-dd-ee-ff")
    assert evaluate_check(check, EMPTY, None, T0) == CheckResult(False, [], ["aa-bb-cc-dd-ee-ff"])
    data = PostureData(mac=MacRecord(addresses=("aa-bb-cc-dd-ee-ff",), timed_out=True))
    assert evaluate_check(check, data, None, T0).passing is False


# --- DOMAIN -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reported", "passing"),
    [("corp.example", True), ("CORP.Example", True), ("LAB", True), ("corp", False), ("sub.corp.example", False),
     (" corp.example", False), ("", False)],
)
def test_domain(reported: str, passing: bool) -> None:
    check = {"id": "d1", "name": "d", "typeId": "DOMAIN", "domains": ["Corp.Example", "lab"]}
    assert evaluate_check(check, PostureData(domain=DomainRecord(domain=reported)), None, T0).passing is passing


def test_domain_missing_or_timed_out() -> None:
    check = {"id": "d1", "name": "d", "typeId": "DOMAIN", "domains": ["corp"]}
    assert evaluate_check(check, EMPTY, None, T0) == CheckResult(False, "", ["corp"])
    data = PostureData(domain=DomainRecord(domain="corp", timed_out=True))
    assert evaluate_check(check, data, None, T0) == CheckResult(False, "corp", ["corp"])


# --- PROCESS ------------------------------------------------------------------------------------------------------


def _process_check(hashes: list[str], fingerprint: str = "") -> dict[str, Any]:
    process = {"osType": "Windows", "path": "C:\\a.exe", "hashes": hashes, "signerFingerprint": fingerprint}
    return {"id": "p1", "name": "proc", "typeId": "PROCESS", "process": process}


def _process_response(record: ProcessRecord, check_id: str) -> dict[str, Any]:
    return {"id": check_id, "typeId": "PROCESS", "path": record.path, "isRunning": record.is_running,
            "hash": record.hash, "signerFingerprints": list(record.signer_fingerprints)}


def _proc(path: str = "C:\\a.exe", running: bool = True, hash_: str = SHA256_A, fps: tuple[str, ...] = (),
          *, timed_out: bool = False) -> ProcessRecord:
    """A PROCESS record as received (hash and fingerprints cleaned to lower-case hex)."""
    reported = ProcessRecord(path=path, is_running=running, hash=hash_, signer_fingerprints=fps)
    data, _ = apply_response(EMPTY, _process_response(reported, "p"), T0)
    record = data.processes["p"]
    return replace(record, timed_out=True) if timed_out else record


@pytest.mark.parametrize(
    ("hashes", "fingerprint", "record", "passing"),
    [
        ([], "", _proc(), True),
        ([], "", _proc(hash_=""), True),
        ([SHA256_A], "", _proc(), True),
        ([SHA256_B, SHA256_A], "", _proc(hash_=SHA256_A.upper()), True),
        ([SHA256_B], "", _proc(), False),
        ([], SHA1_A, _proc(fps=(SHA1_B, SHA1_A.upper())), True),
        ([], SHA1_A, _proc(fps=(":".join(["11"] * 20),)), True),
        ([], SHA1_A, _proc(fps=(SHA1_B,)), False),
        ([], SHA1_A, _proc(), False),
        ([SHA256_A], SHA1_A, _proc(fps=(SHA1_A,)), True),
        ([SHA256_B], SHA1_A, _proc(fps=(SHA1_A,)), False),
        ([], "", _proc(running=False), False),
        ([], "", _proc(timed_out=True), False),
        # osType and path of the check are not compared.
        ([], "", _proc(path="/somewhere/else"), True),
    ],
)
def test_process(hashes: list[str], fingerprint: str, record: ProcessRecord, passing: bool) -> None:
    data = PostureData(processes={"p1": record})
    assert evaluate_check(_process_check(hashes, fingerprint), data, None, T0).passing is passing


def test_process_only_the_record_for_this_check_counts() -> None:
    data = PostureData(processes={"other": _proc()}, process_paths={"C:\\a.exe": _proc()})
    result = evaluate_check(_process_check([]), data, None, T0)
    assert result == CheckResult(
        passing=False,
        actual_value={"hash": "", "isRunning": False, "signerFingerprints": []},
        expected_value={"osType": "Windows", "path": "C:\\a.exe", "hashes": [], "signerFingerprint": ""},
    )


def test_process_actual_value() -> None:
    data = PostureData(processes={"p1": _proc(running=False, fps=(SHA1_A,))})
    result = evaluate_check(_process_check([SHA256_B], SHA1_B), data, None, T0)
    assert result.actual_value == {"hash": SHA256_A, "isRunning": False, "signerFingerprints": [SHA1_A]}


# --- PROCESS_MULTI ------------------------------------------------------------------------------------------------

PATHS = ["/bin/a", "/bin/b", "/bin/c", "/bin/d"]


def _multi_check(semantic: str, processes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    if processes is None:
        processes = [{"osType": "Linux", "path": p, "hashes": [SHA256_A], "signerFingerprints": [SHA1_A]}
                     for p in PATHS]
    return {"id": "pm1", "name": "multi", "typeId": "PROCESS_MULTI", "semantic": semantic, "processes": processes}


class _Submissions:
    """Accumulates PROCESS responses as the identity actor does (per check id and per path)."""

    def __init__(self) -> None:
        self.data = EMPTY

    def submit(self, record: ProcessRecord, check_id: str = "pm1") -> PostureData:
        self.data, _ = apply_response(self.data, _process_response(record, check_id), T0)
        return self.data


def test_process_multi_all_of_sequence() -> None:
    check = _multi_check("AllOf")
    subs = _Submissions()
    assert evaluate_check(check, EMPTY, None, T0).passing is False
    for i, path in enumerate(PATHS):
        data = subs.submit(_proc(path=path, fps=(SHA1_A,)))
        # Passing only once all four are running with matching hash and signer.
        assert evaluate_check(check, data, None, T0).passing is (i == len(PATHS) - 1)
    data = subs.submit(_proc(path="/bin/c", running=False, fps=(SHA1_A,)))
    assert evaluate_check(check, data, None, T0).passing is False
    data = subs.submit(_proc(path="/bin/c", fps=(SHA1_A.upper(),), hash_=SHA256_A.upper()))
    assert evaluate_check(check, data, None, T0).passing is True
    data = subs.submit(_proc(path="/bin/a", fps=(SHA1_B,)))
    assert evaluate_check(check, data, None, T0).passing is False


@pytest.mark.parametrize("semantic", ["AnyOf", "OneOf"])
def test_process_multi_any_of_sequence(semantic: str) -> None:
    check = _multi_check(semantic)
    subs = _Submissions()
    bad = [
        _proc(path="/bin/a", running=False, fps=(SHA1_A,)),
        _proc(path="/bin/b", hash_=SHA256_B, fps=(SHA1_A,)),
        _proc(path="/bin/c", fps=(SHA1_B,)),
        _proc(path="/bin/elsewhere", fps=(SHA1_A,)),
    ]
    for record in bad:
        assert evaluate_check(check, subs.submit(record), None, T0).passing is False
    assert evaluate_check(check, subs.submit(_proc(path="/bin/d", fps=(SHA1_A,))), None, T0).passing is True


def test_process_multi_path_is_exact_and_case_sensitive() -> None:
    check = _multi_check("AnyOf", [{"osType": "Windows", "path": "C:\\A.exe", "hashes": [], "signerFingerprints": []}])
    data = PostureData(process_paths={"C:\\a.exe": _proc(path="C:\\a.exe")})
    assert evaluate_check(check, data, None, T0).passing is False


@pytest.mark.parametrize(("semantic", "passing"), [("AllOf", False), ("AnyOf", True)])
def test_process_multi_empty_path_spec(semantic: str, passing: bool) -> None:
    processes = [{"osType": "Linux", "path": "", "hashes": [], "signerFingerprints": []},
                 {"osType": "Linux", "path": "/bin/a", "hashes": [], "signerFingerprints": []}]
    data = PostureData(process_paths={"/bin/a": _proc(path="/bin/a"), "": _proc(path="")})
    assert evaluate_check(_multi_check(semantic, processes), data, None, T0).passing is passing


def test_process_multi_empty_lists_mean_any() -> None:
    check = _multi_check("AllOf", [{"osType": "Linux", "path": "/bin/a"}])
    data = PostureData(process_paths={"/bin/a": _proc(path="/bin/a", hash_="", fps=())})
    assert evaluate_check(check, data, None, T0).passing is True


def test_process_multi_values_and_failure_entry() -> None:
    spec = {"osType": "Linux", "path": "/bin/a", "hashes": [SHA256_B], "signerFingerprints": []}
    check = _multi_check("AllOf", [spec])
    record = _proc(path="/bin/a", fps=(SHA1_A,))
    data = PostureData(processes={"pm1": record}, process_paths={"/bin/a": record})
    result = evaluate_check(check, data, None, T0)
    assert result.passing is False
    assert failure_entry(check, result) == {
        "postureCheckId": "pm1",
        "postureCheckName": "multi",
        "postureCheckType": "PROCESS_MULTI",
        "semantic": "AllOf",
        "actualValue": [{"hash": SHA256_A, "isRunning": True, "signerFingerprints": [SHA1_A], "path": "/bin/a"}],
        "expectedValue": [{"osType": "Linux", "path": "/bin/a", "hashes": [SHA256_B], "signerFingerprints": []}],
    }
    assert evaluate_check(check, EMPTY, None, T0).actual_value == []


# --- misc ---------------------------------------------------------------------------------------------------------


def test_unknown_type_fails() -> None:
    assert evaluate_check({"id": "x", "typeId": "NOPE"}, EMPTY, None, T0) == CheckResult(False, None, None)


@pytest.mark.parametrize(
    ("check", "data", "entry_values"),
    [
        ({"id": "o", "name": "n", "typeId": "OS", "operatingSystems": [{"type": "Linux", "versions": []}]},
         EMPTY, ({"type": "", "version": ""}, [{"type": "Linux", "versions": []}])),
        ({"id": "o", "name": "n", "typeId": "MAC", "macAddresses": ["aa-bb-cc-dd-ee-ff"]},
         PostureData(mac=MacRecord(addresses=("01-02-03-04-05-06",))),
         (["01-02-03-04-05-06"], ["aa-bb-cc-dd-ee-ff"])),
        ({"id": "o", "name": "n", "typeId": "DOMAIN", "domains": ["corp"]},
         PostureData(domain=DomainRecord(domain="home")), ("home", ["corp"])),
    ],
)
def test_failure_entry_simple_types(
    check: dict[str, Any], data: PostureData, entry_values: tuple[Any, Any]
) -> None:
    result = evaluate_check(check, data, None, T0)
    assert result.passing is False
    assert failure_entry(check, result) == {
        "postureCheckId": "o",
        "postureCheckName": "n",
        "postureCheckType": check["typeId"],
        "actualValue": entry_values[0],
        "expectedValue": entry_values[1],
    }
