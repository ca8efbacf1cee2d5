"""The [generate] table: how the faults generated from the sites are made
(their delay, window, conditions, configs and known survivors)."""

from __future__ import annotations

from pathlib import Path

from faults.catalog.faults import check_conditions, check_delay
from faults.catalog.fields import expect_type, fail
from faults.catalog.model import (
    Config,
    GenerateSettings,
    Target,
)


def generate_table(
    path: Path, data: dict, configs: tuple[Config, ...], target: Target
) -> GenerateSettings:
    raw = expect_type(path, "top level", "generate", data.get("generate", {}), dict, "a table")
    keys = {
        "ns", "window_ns", "when", "marker", "configs", "site_configs", "survivor_ok", "not_run",
    }  # fmt: skip
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
    not_run = expect_type(path, "generate", "not_run", raw.get("not_run", {}), dict, "a table")
    for prefix, why in not_run.items():
        expect_type(path, "generate", f"not_run.{prefix!r}", why, str, "a string")
        if not why.strip():
            raise fail(path, "generate", f"not_run.{prefix!r}: say why no config runs that code")
        if prefix in by_site:
            raise fail(path, "generate", f"not_run.{prefix!r}: site_configs runs it too")
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
        not_run=tuple(not_run.items()),
    )
