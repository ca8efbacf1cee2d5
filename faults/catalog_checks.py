"""The catalog's TOML, checked table by table into its types: every error
names the file, the fault and the field at fault (docs/architecture.md,
"Pipeline of the fault engine", item 1)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from string import Formatter

from faults.catalog_exposure import exposure_table
from faults.catalog_publisher import publisher_table
from faults.catalog_refs import check_includes
from faults.catalog_shrink import shrink_table
from faults.catalog_types import (
    LOG_KEYS,
    PLACEHOLDERS,
    PTX_PLACEHOLDERS,
    Catalog,
    CatalogError,
    Config,
    Fault,
    GenerateSettings,
    LogPatterns,
    Patch,
    Target,
    catalog_error,
    contract_spellings,
)
from faults.mutate import mutation_rules

LANGUAGES = ("cuda", "cpp")
ACTIONS_TAKING = {  # action -> the optional keys it accepts besides site/action
    "delay": {"ns", "at", "when", "marker"},
    "skip": {"marker"},
    # forced order (docs/architecture.md, "Delays that expose")
    "hold": {"ns", "when", "marker", "cell"},
    "signal": {"when", "cell"},
}
FAULT_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
# The injected spin compares against `<ns>ull`; a signed 64-bit bound keeps
# every clock difference it is compared with representable.
MAX_DELAY_NS = 2**63 - 1


def _fail(path: Path, where: str, message: str) -> CatalogError:
    return catalog_error(path, where, message)


def _expect_type(path, where, key, value, kind, name):
    if not isinstance(value, kind):
        raise _fail(path, where, f"{key} must be {name}, got {value!r}")
    return value


def _strings(path: Path, where: str, key: str, value, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _fail(path, where, f"{key} must be {name}, got {value!r}")
    return tuple(value)


def _tables(path: Path, where: str, key: str, value) -> list[dict]:
    """An array of tables, each element checked (`key #<index>` names one)."""
    _expect_type(path, where, key, value, list, "an array of tables")
    for index, item in enumerate(value):
        _expect_type(path, where, f"{key} #{index}", item, dict, "a table")
    return value


def _env(path: Path, where: str, value) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _fail(path, where, f"env must be a table of strings, got {value!r}")
    return dict(value)


def _command(path: Path, where: str, key: str, value, known=PLACEHOLDERS) -> tuple[str, ...]:
    """Command words: strings whose every `{name}` is one faults/run.py (or,
    for `known` ones, its caller) fills in: an unknown one would fail late."""
    words = _strings(path, where, key, value, "a list of strings")
    for word in words:
        try:
            unknown = [name for name in _placeholders(word) if name not in known]
            if not unknown:  # a stray brace, a bad conversion or format spec
                word.format(**dict.fromkeys(known, ""))
        except ValueError as error:
            raise _fail(path, where, f"{key}: cannot fill in {word!r}: {error}") from None
        if unknown:
            names = ", ".join(f"{{{name}}}" for name in known)
            message = f"unknown placeholder {{{unknown[0]}}} in {word!r}; known: {names}"
            raise _fail(path, where, f"{key}: {message}")
    return words


def _placeholders(word: str) -> list[str]:
    """The field names of `word` as str.format reads them, those nested in a
    format spec too (`{}` is the name "")."""
    names = []
    for _, name, spec, _ in Formatter().parse(word):
        if name is not None:
            names.append(name)
        if spec:
            names += _placeholders(spec)
    return names


def _conditions(path: Path, where: str, raw: dict) -> None:
    for key in ("when", "marker"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise _fail(path, where, f"{key}: must be a non-empty C condition")


def catalog_from_tables(path: Path, data: dict) -> Catalog:
    """The catalog the TOML tables of `path` describe, every table checked."""
    tables = {"target", "config", "fault", "control", "generate", "exposure", "shrink"}
    unknown = sorted(set(data) - tables)
    if unknown:
        raise _fail(path, "top level", f"unknown tables {unknown}")
    target = _target(path, data.get("target"))
    target = replace(target, mutations=mutation_rules(path, data["target"].get("mutation", [])))
    configs = _configs(path, data.get("config", []))
    faults: dict[str, Fault] = {}
    for index, raw in enumerate(_tables(path, "top level", "fault", data.get("fault", []))):
        fault = _fault(path, index, raw, target)
        if fault.id in faults:
            raise _fail(path, f"fault {fault.id}", "id: duplicate fault id")
        faults[fault.id] = fault
    if not faults:  # a sweep of nothing would pass
        raise _fail(path, "top level", "no [[fault]]: a catalog needs at least one fault")
    control = _control(path, data.get("control", {}), target)
    generate = _generate(path, data, configs, target)
    exposure = exposure_table(path, data.get("exposure"))
    shrink = shrink_table(data.get("shrink"), lambda where, message: _fail(path, where, message))
    catalog = Catalog(
        path, target, configs, faults, control, generate, exposure=exposure, shrink=shrink
    )
    check_includes(catalog)
    return catalog


def _control(path: Path, raw, target: Target) -> tuple[Patch, ...]:
    """[control]: the forced-fail control's patches (a misspelt key would
    leave it without any, and the control would silently not run)."""
    _expect_type(path, "top level", "control", raw, dict, "a table")
    unknown = sorted(set(raw) - {"patches"})
    if unknown:
        raise _fail(path, "control", f"unknown keys {unknown}")
    patches = _tables(path, "control", "patches", raw.get("patches", []))
    return tuple(_patch(path, "control", "control", i, p, target) for i, p in enumerate(patches))


TARGET_KEYS = frozenset(
    (
        "name sources language run log build clock rank timeout_s env gpus"
        " contract mutation publisher logical"
    ).split()
)


def _logical_run(path: Path, raw) -> tuple[str, ...]:
    """[target.logical] run: the command that runs every rank on one GPU."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or set(raw) != {"run"}:
        raise _fail(path, "target.logical", f"a table with one key, run; got {raw!r}")
    return _command(path, "target.logical", "run", raw["run"])


def _target(path: Path, raw) -> Target:
    if not isinstance(raw, dict):
        raise _fail(path, "target", "a [target] table is required")
    where = "target"
    for key in ("name", "sources", "language", "run", "log"):
        if key not in raw:
            raise _fail(path, where, f"{key}: required")
    unknown = sorted(set(raw) - TARGET_KEYS)
    if unknown:
        raise _fail(path, where, f"unknown keys {unknown}")
    for key in ("name", "sources", "rank"):
        if key in raw:
            _expect_type(path, where, key, raw[key], str, "a string")
    if raw["language"] not in LANGUAGES:
        raise _fail(path, where, f"language: {raw['language']!r} is not one of {LANGUAGES}")
    clock = raw.get("clock", "")
    if not isinstance(clock, str) or (raw["language"] == "cuda" and not clock.strip()):
        raise _fail(
            path,
            where,
            f"clock: an expression giving nanoseconds (a cuda target's delays need it), "
            f"got {clock!r}",
        )
    gpus = raw.get("gpus", 0)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
        raise _fail(path, where, f"gpus: an int >= 0, got {gpus!r}")
    timeout_s = raw.get("timeout_s", 300)
    if not isinstance(timeout_s, int | float) or isinstance(timeout_s, bool) or timeout_s <= 0:
        raise _fail(path, where, f"timeout_s: a positive number of seconds, got {timeout_s!r}")
    return Target(
        name=raw["name"],
        sources=raw["sources"],
        language=raw["language"],
        run=_command(path, where, "run", raw["run"]),
        log=_log_patterns(path, raw["log"]),
        build=_command(path, where, "build", raw.get("build", [])),
        clock=clock,
        rank=raw.get("rank", "0"),
        timeout_s=float(timeout_s),
        env=_env(path, where, raw.get("env", {})),
        gpus=gpus,
        contract=_contract(path, raw["contract"]) if "contract" in raw else None,
        publisher=publisher_table(path, raw.get("publisher"), float(timeout_s)),
        logical_run=_logical_run(path, raw.get("logical")),
    )


def _contract(path: Path, raw):
    """[target.contract]: its `ptx` command here, the spellings in catalog_types."""
    ptx = raw.get("ptx", []) if isinstance(raw, dict) else []
    words = _command(path, "target.contract", "ptx", ptx, known=PTX_PLACEHOLDERS)
    return contract_spellings(path, raw, words)


def _log_patterns(path: Path, raw) -> LogPatterns:
    """[target.log]: every key a regular expression that cannot match an
    empty line (it would count every line); `digest` captures one group."""
    where = "target.log"
    if not isinstance(raw, dict):
        raise _fail(path, where, f"a table of regular expressions {list(LOG_KEYS)}, got {raw!r}")
    unknown = sorted(set(raw) - set(LOG_KEYS))
    if unknown:
        raise _fail(path, where, f"unknown keys {unknown}")
    patterns = {}
    for key in LOG_KEYS:
        if key not in raw:
            raise _fail(path, where, f"{key}: required")
        text = _expect_type(path, where, key, raw[key], str, "a regular expression")
        try:
            pattern = re.compile(text)
        except re.error as error:
            raise _fail(
                path, where, f"{key}: {text!r} is not a regular expression: {error}"
            ) from None
        if pattern.search(""):
            raise _fail(path, where, f"{key}: {text!r} matches an empty line")
        patterns[key] = pattern
    if patterns["digest"].groups != 1:
        raise _fail(
            path,
            where,
            f"digest: {raw['digest']!r} has {patterns['digest'].groups} groups; "
            "exactly one must capture the tree digest",
        )
    return LogPatterns(**patterns)


def _configs(path: Path, raw) -> tuple[Config, ...]:
    configs, names = [], set()
    for index, entry in enumerate(_tables(path, "top level", "config", raw)):
        where = f"config #{index}"
        if "name" not in entry:
            raise _fail(path, where, "name: required")
        _expect_type(path, where, "name", entry["name"], str, "a string")
        if entry["name"] in names:
            raise _fail(path, f"config {entry['name']}", "name: duplicate config name")
        names.add(entry["name"])
        where = f"config {entry['name']}"
        unknown = sorted(set(entry) - {"name", "args", "env", "gpus"})
        if unknown:
            raise _fail(path, where, f"unknown keys {unknown}")
        args = _command(path, where, "args", entry.get("args", []))
        gpus = entry.get("gpus", 0)
        if "gpus" in entry and (not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1):
            raise _fail(path, where, f"gpus: a positive int, got {gpus!r}")
        env = _env(path, where, entry.get("env", {}))
        configs.append(Config(entry["name"], args, env, gpus))
    if not configs:
        configs.append(Config("default"))
    return tuple(configs)


def _fault(path: Path, index: int, raw: dict, target: Target) -> Fault:
    fault_id = raw.get("id")
    where = f"fault {fault_id}" if fault_id else f"fault #{index}"
    if not isinstance(fault_id, str) or not FAULT_ID.match(fault_id):
        raise _fail(path, where, f"id: {fault_id!r} is not a valid fault id")
    unknown = sorted(
        set(raw) - {"id", "title", "expect", "includes", "survivor_ok", "patches", "configs"}
    )
    if unknown:
        raise _fail(path, where, f"unknown keys {unknown}")
    if raw.get("expect") not in ("pass", "fail"):
        raise _fail(path, where, f"expect: {raw.get('expect')!r} is not 'pass' or 'fail'")
    if "survivor_ok" in raw and raw["expect"] != "fail":
        raise _fail(path, where, "survivor_ok: only a must-fail fault can be a known survivor")
    for key in ("title", "survivor_ok"):
        if key in raw:
            _expect_type(path, where, key, raw[key], str, "a string")
    includes = _strings(path, where, "includes", raw.get("includes", []), "a list of fault ids")
    patches = tuple(
        _patch(path, where, fault_id, i, p, target)
        for i, p in enumerate(_tables(path, where, "patches", raw.get("patches", [])))
    )
    if not patches and not includes:
        raise _fail(path, where, "patches: a fault needs patches or includes")
    configs = _strings(path, where, "configs", raw.get("configs", []), "a list of config names")
    return Fault(
        fault_id,
        raw.get("title", ""),
        raw["expect"],
        patches,
        includes,
        raw.get("survivor_ok"),
        configs,
    )


def _patch(path: Path, where: str, owner: str, index: int, raw: dict, target: Target) -> Patch:
    where = f"{where} patch #{index}"
    if "file" in raw:
        extra = sorted(set(raw) - {"file", "old", "new", "marker", "marker_site"})
        if extra:
            raise _fail(
                path,
                where,
                f"{', '.join(extra)}: a text patch takes only file, old, new, marker, marker_site",
            )
        _expect_type(path, where, "file", raw["file"], str, "a string")
        for key in ("old", "new"):
            if not isinstance(raw.get(key), str):
                raise _fail(path, where, f"{key}: required string for a text patch")
        if not raw["old"]:
            raise _fail(path, where, "old: must not be empty")
        _conditions(path, where, raw)
        if "marker_site" in raw:
            _expect_type(path, where, "marker_site", raw["marker_site"], str, "a site name")
        return Patch(
            owner,
            file=raw["file"],
            old=raw["old"],
            new=raw["new"],
            marker=raw.get("marker", "true"),
            marker_site=raw.get("marker_site"),
        )
    if "site" not in raw:
        raise _fail(path, where, "site: required (or file/old/new for a text patch)")
    _expect_type(path, where, "site", raw["site"], str, "a string")
    action = raw.get("action")
    if not isinstance(action, str) or action not in ACTIONS_TAKING:
        raise _fail(path, where, f"action: {action!r} is not one of {sorted(ACTIONS_TAKING)}")
    extra = sorted(set(raw) - {"site", "action"} - ACTIONS_TAKING[action])
    if extra:
        raise _fail(path, where, f"{', '.join(extra)}: the {action} action takes none")
    if action in ("delay", "hold"):
        ns = raw.get("ns")
        if not isinstance(ns, int) or isinstance(ns, bool) or ns <= 0:
            raise _fail(
                path, where, f"ns: a {action} needs a positive int of nanoseconds, got {ns!r}"
            )
        _check_delay(path, where, "ns", ns, target)
        if raw.get("at", "start") not in ("start", "end"):
            raise _fail(path, where, f"at: {raw['at']!r} is not 'start' or 'end'")
    _conditions(path, where, raw)
    if "cell" in raw and (not isinstance(raw["cell"], str) or not raw["cell"].strip()):
        raise _fail(path, where, f"cell: an index expression, got {raw['cell']!r}")
    return Patch(
        owner,
        site=raw["site"],
        action=action,
        ns=raw.get("ns", 0),
        at=raw.get("at", "start"),
        when=raw.get("when", "true"),
        marker=raw.get("marker", "true"),
        cell=raw.get("cell", "0"),
    )


def _check_delay(path: Path, where: str, key: str, ns: int, target: Target) -> None:
    """A delay fits the injected 64-bit comparison and ends before the outer
    timeout: one that outlasts it can only ever be judged on the timeout."""
    if ns > MAX_DELAY_NS:
        raise _fail(
            path, where, f"{key}: {ns} ns does not fit a signed 64-bit count (at most 2**63 - 1)"
        )
    if ns >= target.timeout_s * 1e9:
        raise _fail(
            path,
            where,
            f"{key}: {ns} ns is not shorter than the target's timeout_s ({target.timeout_s:g} s)",
        )


def _generate(
    path: Path, data: dict, configs: tuple[Config, ...], target: Target
) -> GenerateSettings:
    raw = _expect_type(path, "top level", "generate", data.get("generate", {}), dict, "a table")
    keys = {"ns", "window_ns", "when", "marker", "configs", "site_configs", "survivor_ok"}
    unknown = sorted(set(raw) - keys)
    if unknown:
        raise _fail(path, "generate", f"unknown keys {unknown}")
    _conditions(path, "generate", raw)
    ns = raw.get("ns", GenerateSettings.ns)
    window_ns = raw.get("window_ns", ns)
    for key, value in (("ns", ns), ("window_ns", window_ns)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise _fail(path, "generate", f"{key}: a positive int of nanoseconds, got {value!r}")
        _check_delay(path, "generate", key, value, target)
    config_names = {c.name for c in configs}

    def names(key: str, value) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _fail(path, "generate", f"{key}: a list of config names, got {value!r}")
        if key != "configs" and not value:
            raise _fail(path, "generate", f"{key}: an empty list would run those faults nowhere")
        for name in value:
            if name not in config_names:
                raise _fail(path, "generate", f"{key}: unknown config {name!r}")
        return tuple(value)

    by_site = _expect_type(
        path, "generate", "site_configs", raw.get("site_configs", {}), dict, "a table"
    )
    survivors = _expect_type(
        path, "generate", "survivor_ok", raw.get("survivor_ok", {}), dict, "a table"
    )
    for site, why in survivors.items():
        _expect_type(path, "generate", f"survivor_ok.{site!r}", why, str, "a string")
    return GenerateSettings(
        ns=ns,
        window_ns=window_ns,
        when=raw.get("when", "true"),
        marker=raw.get("marker", "true"),
        configs=names("configs", raw.get("configs", [])),
        site_configs=tuple(
            (prefix, names(f"site_configs.{prefix!r}", value)) for prefix, value in by_site.items()
        ),
        survivor_ok=tuple(survivors.items()),
    )
