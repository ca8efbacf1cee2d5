"""The catalog's TOML, checked table by table into its types: every error
names the file, the fault and the field at fault (docs/architecture.md,
"Pipeline of the fault engine", item 1)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from faults.catalog_exposure import exposure_table
from faults.catalog_fields import command, env_table, expect_type, fail, tables
from faults.catalog_patches import check_conditions, check_delay, fault_table, patch_table
from faults.catalog_publisher import publisher_table
from faults.catalog_refs import check_includes
from faults.catalog_schedule import schedule_spelling
from faults.catalog_shrink import shrink_table
from faults.catalog_types import (
    LOG_KEYS,
    PTX_PLACEHOLDERS,
    Catalog,
    Config,
    Fault,
    GenerateSettings,
    LogPatterns,
    Patch,
    Target,
    contract_spellings,
)
from faults.mutate import mutation_rules

LANGUAGES = ("cuda", "cpp")


def catalog_from_tables(path: Path, data: dict) -> Catalog:
    """The catalog the TOML tables of `path` describe, every table checked."""
    known = {"target", "config", "fault", "control", "generate", "exposure", "shrink"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise fail(path, "top level", f"unknown tables {unknown}")
    target = _target(path, data.get("target"))
    target = replace(target, mutations=mutation_rules(path, data["target"].get("mutation", [])))
    configs = _configs(path, data.get("config", []))
    faults: dict[str, Fault] = {}
    for index, raw in enumerate(tables(path, "top level", "fault", data.get("fault", []))):
        fault = fault_table(path, index, raw, target)
        if fault.id in faults:
            raise fail(path, f"fault {fault.id}", "id: duplicate fault id")
        faults[fault.id] = fault
    if not faults:  # a sweep of nothing would pass
        raise fail(path, "top level", "no [[fault]]: a catalog needs at least one fault")
    control = _control(path, data.get("control", {}), target)
    generate = _generate(path, data, configs, target)
    exposure = exposure_table(path, data.get("exposure"))
    shrink = shrink_table(data.get("shrink"), lambda where, message: fail(path, where, message))
    catalog = Catalog(
        path, target, configs, faults, control, generate, exposure=exposure, shrink=shrink
    )
    check_includes(catalog)
    return catalog


def _control(path: Path, raw, target: Target) -> tuple[Patch, ...]:
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


TARGET_KEYS = frozenset(
    (
        "name sources language run log build clock rank timeout_s env gpus"
        " contract mutation publisher logical sass schedule"
    ).split()
)


def _logical_run(path: Path, raw) -> tuple[str, ...]:
    """[target.logical] run: the command that runs every rank on one GPU."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or set(raw) != {"run"}:
        raise fail(path, "target.logical", f"a table with one key, run; got {raw!r}")
    return command(path, "target.logical", "run", raw["run"])


def _target(path: Path, raw) -> Target:
    if not isinstance(raw, dict):
        raise fail(path, "target", "a [target] table is required")
    where = "target"
    for key in ("name", "sources", "language", "run", "log"):
        if key not in raw:
            raise fail(path, where, f"{key}: required")
    unknown = sorted(set(raw) - TARGET_KEYS)
    if unknown:
        raise fail(path, where, f"unknown keys {unknown}")
    for key in ("name", "sources", "rank"):
        if key in raw:
            expect_type(path, where, key, raw[key], str, "a string")
    if raw["language"] not in LANGUAGES:
        raise fail(path, where, f"language: {raw['language']!r} is not one of {LANGUAGES}")
    clock = raw.get("clock", "")
    if not isinstance(clock, str) or (raw["language"] == "cuda" and not clock.strip()):
        raise fail(
            path,
            where,
            f"clock: an expression giving nanoseconds (a cuda target's delays need it), "
            f"got {clock!r}",
        )
    gpus = raw.get("gpus", 0)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
        raise fail(path, where, f"gpus: an int >= 0, got {gpus!r}")
    timeout_s = raw.get("timeout_s", 300)
    if not isinstance(timeout_s, int | float) or isinstance(timeout_s, bool) or timeout_s <= 0:
        raise fail(path, where, f"timeout_s: a positive number of seconds, got {timeout_s!r}")
    return Target(
        name=raw["name"],
        sources=raw["sources"],
        language=raw["language"],
        run=command(path, where, "run", raw["run"]),
        log=_log_patterns(path, raw["log"]),
        build=command(path, where, "build", raw.get("build", [])),
        clock=clock,
        rank=raw.get("rank", "0"),
        timeout_s=float(timeout_s),
        env=env_table(path, where, raw.get("env", {})),
        gpus=gpus,
        contract=_contract(path, raw["contract"]) if "contract" in raw else None,
        publisher=publisher_table(path, raw.get("publisher"), float(timeout_s)),
        logical_run=_logical_run(path, raw.get("logical")),
        schedule=schedule_spelling(path, raw.get("schedule")),
        sass=_sass(path, raw.get("sass")),
    )


def _sass(path: Path, raw) -> tuple[str, ...]:
    """[target.sass] cubin: the command that writes every kernel variant's cubin."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or set(raw) != {"cubin"}:
        raise fail(path, "target.sass", f"a table with one key, cubin; got {raw!r}")
    return command(path, "target.sass", "cubin", raw["cubin"], known=PTX_PLACEHOLDERS)


def _contract(path: Path, raw):
    """[target.contract]: its `ptx` command here, the spellings in catalog_types."""
    ptx = raw.get("ptx", []) if isinstance(raw, dict) else []
    words = command(path, "target.contract", "ptx", ptx, known=PTX_PLACEHOLDERS)
    return contract_spellings(path, raw, words)


def _log_patterns(path: Path, raw) -> LogPatterns:
    """[target.log]: every key a regular expression that cannot match an
    empty line (it would count every line); `digest` captures one group."""
    where = "target.log"
    if not isinstance(raw, dict):
        raise fail(path, where, f"a table of regular expressions {list(LOG_KEYS)}, got {raw!r}")
    unknown = sorted(set(raw) - set(LOG_KEYS))
    if unknown:
        raise fail(path, where, f"unknown keys {unknown}")
    patterns = {}
    for key in LOG_KEYS:
        if key not in raw:
            raise fail(path, where, f"{key}: required")
        text = expect_type(path, where, key, raw[key], str, "a regular expression")
        try:
            pattern = re.compile(text)
        except re.error as error:
            raise fail(
                path, where, f"{key}: {text!r} is not a regular expression: {error}"
            ) from None
        if pattern.search(""):
            raise fail(path, where, f"{key}: {text!r} matches an empty line")
        patterns[key] = pattern
    if patterns["digest"].groups != 1:
        raise fail(
            path,
            where,
            f"digest: {raw['digest']!r} has {patterns['digest'].groups} groups; "
            "exactly one must capture the tree digest",
        )
    return LogPatterns(**patterns)


def _configs(path: Path, raw) -> tuple[Config, ...]:
    configs, names = [], set()
    for index, entry in enumerate(tables(path, "top level", "config", raw)):
        where = f"config #{index}"
        if "name" not in entry:
            raise fail(path, where, "name: required")
        expect_type(path, where, "name", entry["name"], str, "a string")
        if entry["name"] in names:
            raise fail(path, f"config {entry['name']}", "name: duplicate config name")
        names.add(entry["name"])
        where = f"config {entry['name']}"
        unknown = sorted(set(entry) - {"name", "args", "env", "gpus"})
        if unknown:
            raise fail(path, where, f"unknown keys {unknown}")
        args = command(path, where, "args", entry.get("args", []))
        gpus = entry.get("gpus", 0)
        if "gpus" in entry and (not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1):
            raise fail(path, where, f"gpus: a positive int, got {gpus!r}")
        env = env_table(path, where, entry.get("env", {}))
        configs.append(Config(entry["name"], args, env, gpus))
    if not configs:
        configs.append(Config("default"))
    return tuple(configs)


def _generate(
    path: Path, data: dict, configs: tuple[Config, ...], target: Target
) -> GenerateSettings:
    raw = expect_type(path, "top level", "generate", data.get("generate", {}), dict, "a table")
    keys = {"ns", "window_ns", "when", "marker", "configs", "site_configs", "survivor_ok"}
    unknown = sorted(set(raw) - keys)
    if unknown:
        raise fail(path, "generate", f"unknown keys {unknown}")
    check_conditions(path, "generate", raw)
    ns = raw.get("ns", GenerateSettings.ns)
    window_ns = raw.get("window_ns", ns)
    for key, value in (("ns", ns), ("window_ns", window_ns)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise fail(path, "generate", f"{key}: a positive int of nanoseconds, got {value!r}")
        check_delay(path, "generate", key, value, target)
    config_names = {c.name for c in configs}

    def names(key: str, value) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(path, "generate", f"{key}: a list of config names, got {value!r}")
        if key != "configs" and not value:
            raise fail(path, "generate", f"{key}: an empty list would run those faults nowhere")
        for name in value:
            if name not in config_names:
                raise fail(path, "generate", f"{key}: unknown config {name!r}")
        return tuple(value)

    by_site = expect_type(
        path, "generate", "site_configs", raw.get("site_configs", {}), dict, "a table"
    )
    survivors = expect_type(
        path, "generate", "survivor_ok", raw.get("survivor_ok", {}), dict, "a table"
    )
    for site, why in survivors.items():
        expect_type(path, "generate", f"survivor_ok.{site!r}", why, str, "a string")
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
