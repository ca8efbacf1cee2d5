"""The catalog's [[fault]] tables and their patches, checked into Fault and
Patch: every error names the file, the fault and the field at fault."""

from __future__ import annotations

import re
from pathlib import Path

from faults.catalog.fields import expect_type, fail, fail_in, strings, tables
from faults.catalog.model import (
    Fault,
    Patch,
    Target,
)
from faults.schedules.table import patch_schedule

ACTIONS_TAKING = {  # action -> the optional keys it accepts besides site/action
    "delay": {"ns", "at", "when", "marker", "schedule"},
    "skip": {"marker"},
    # forced order (docs/operators.md, "Delays that expose")
    "hold": {"ns", "when", "marker", "cell"},
    "signal": {"when", "cell"},
}
FAULT_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
# The injected spin compares against `<ns>ull`; a signed 64-bit bound keeps
# every clock difference it is compared with representable.
MAX_DELAY_NS = 2**63 - 1


def check_conditions(path: Path, where: str, raw: dict) -> None:
    for key in ("when", "marker"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise fail(path, where, f"{key}: must be a non-empty C condition")


def fault_table(path: Path, index: int, raw: dict, target: Target) -> Fault:
    fault_id = raw.get("id")
    where = f"fault {fault_id}" if fault_id else f"fault #{index}"
    if not isinstance(fault_id, str) or not FAULT_ID.match(fault_id):
        raise fail(path, where, f"id: {fault_id!r} is not a valid fault id")
    unknown = sorted(
        set(raw) - {"id", "title", "expect", "includes", "survivor_ok", "patches", "configs"}
    )
    if unknown:
        raise fail(path, where, f"unknown keys {unknown}")
    if raw.get("expect") not in ("pass", "fail"):
        raise fail(path, where, f"expect: {raw.get('expect')!r} is not 'pass' or 'fail'")
    if "survivor_ok" in raw and raw["expect"] != "fail":
        raise fail(path, where, "survivor_ok: only a must-fail fault can be a known survivor")
    for key in ("title", "survivor_ok"):
        if key in raw:
            expect_type(path, where, key, raw[key], str, "a string")
    includes = strings(path, where, "includes", raw.get("includes", []), "a list of fault ids")
    patches = tuple(
        patch_table(path, where, fault_id, i, p, target)
        for i, p in enumerate(tables(path, where, "patches", raw.get("patches", [])))
    )
    if not patches and not includes:
        raise fail(path, where, "patches: a fault needs patches or includes")
    configs = strings(path, where, "configs", raw.get("configs", []), "a list of config names")
    return Fault(
        fault_id,
        raw.get("title", ""),
        raw["expect"],
        patches,
        includes,
        raw.get("survivor_ok"),
        configs,
    )


def patch_table(path: Path, where: str, owner: str, index: int, raw: dict, target: Target) -> Patch:
    """A patch: a text edit (`file`, `old`, `new`) or an action at a site."""
    where = f"{where} patch #{index}"
    if "file" in raw:
        return _text_patch(path, where, owner, raw)
    return _site_patch(path, where, owner, raw, target)


def _text_patch(path: Path, where: str, owner: str, raw: dict) -> Patch:
    extra = sorted(set(raw) - {"file", "old", "new", "marker", "marker_site"})
    if extra:
        raise fail(
            path,
            where,
            f"{', '.join(extra)}: a text patch takes only file, old, new, marker, marker_site",
        )
    expect_type(path, where, "file", raw["file"], str, "a string")
    for key in ("old", "new"):
        if not isinstance(raw.get(key), str):
            raise fail(path, where, f"{key}: required string for a text patch")
    if not raw["old"]:
        raise fail(path, where, "old: must not be empty")
    check_conditions(path, where, raw)
    if "marker_site" in raw:
        expect_type(path, where, "marker_site", raw["marker_site"], str, "a site name")
    return Patch(
        owner,
        file=raw["file"],
        old=raw["old"],
        new=raw["new"],
        marker=raw.get("marker", "true"),
        marker_site=raw.get("marker_site"),
    )


def _site_patch(path: Path, where: str, owner: str, raw: dict, target: Target) -> Patch:
    if "site" not in raw:
        raise fail(path, where, "site: required (or file/old/new for a text patch)")
    expect_type(path, where, "site", raw["site"], str, "a string")
    action = raw.get("action")
    if not isinstance(action, str) or action not in ACTIONS_TAKING:
        raise fail(path, where, f"action: {action!r} is not one of {sorted(ACTIONS_TAKING)}")
    extra = sorted(set(raw) - {"site", "action"} - ACTIONS_TAKING[action])
    if extra:
        raise fail(path, where, f"{', '.join(extra)}: the {action} action takes none")
    if action in ("delay", "hold"):
        ns = raw.get("ns")
        if not isinstance(ns, int) or isinstance(ns, bool) or ns <= 0:
            raise fail(
                path, where, f"ns: a {action} needs a positive int of nanoseconds, got {ns!r}"
            )
        check_delay(path, where, "ns", ns, target)
        if raw.get("at", "start") not in ("start", "end"):
            raise fail(path, where, f"at: {raw['at']!r} is not 'start' or 'end'")
    check_conditions(path, where, raw)
    if "cell" in raw and (not isinstance(raw["cell"], str) or not raw["cell"].strip()):
        raise fail(path, where, f"cell: an index expression, got {raw['cell']!r}")
    return Patch(
        owner,
        site=raw["site"],
        action=action,
        ns=raw.get("ns", 0),
        at=raw.get("at", "start"),
        when=raw.get("when", "true"),
        marker=raw.get("marker", "true"),
        cell=raw.get("cell", "0"),
        schedule=patch_schedule(
            where, raw["schedule"], raw["site"], target.schedule, fail_in(path)
        )
        if "schedule" in raw
        else None,
    )


def check_delay(path: Path, where: str, key: str, ns: int, target: Target) -> None:
    """A delay fits the injected 64-bit comparison and ends before the outer
    timeout: one that outlasts it can only ever be judged on the timeout."""
    if ns > MAX_DELAY_NS:
        raise fail(
            path, where, f"{key}: {ns} ns does not fit a signed 64-bit count (at most 2**63 - 1)"
        )
    if ns >= target.timeout_s * 1e9:
        raise fail(
            path,
            where,
            f"{key}: {ns} ns is not shorter than the target's timeout_s ({target.timeout_s:g} s)",
        )


def control_table(path: Path, raw, target: Target) -> tuple[Patch, ...]:
    """[control]: the forced-fail control's patches (a misspelt key would
    leave it without any, and the control would silently not run)."""
    expect_type(path, "top level", "control", raw, dict, "a table")
    unknown = sorted(set(raw) - {"patches"})
    if unknown:
        raise fail(path, "control", f"unknown keys {unknown}")
    patches = tables(path, "control", "patches", raw.get("patches", []))
    return tuple(
        patch_table(path, "control", "control", i, p, target) for i, p in enumerate(patches)
    )
