"""[target.publisher], checked: who publishes a release of each producers=
group and whom the delays that expose hold back (docs/operators.md,
"Delays that expose"): one table, one module, as every catalog table."""

from __future__ import annotations

from pathlib import Path

from faults.catalog.errors import catalog_error
from faults.catalog.model import GROUPS, Holding, Publisher

HOLDING_KEYS = ("publisher", "held", "marker", "cell")
# The bound is compared as `<ns>ull` against a clock difference, as a delay is.
MAX_HOLD_NS = 2**63 - 1
DEFAULT_HOLD_NS = 20_000


def publisher_table(path: Path, raw, timeout_s: float) -> Publisher | None:
    """The Publisher `raw` describes (None when the target has none): a
    `hold_ns` bound shorter than the target's timeout, and per group a table
    of C conditions (publisher, held, marker) and an optional cell index."""
    if raw is None:
        return None
    where = "target.publisher"
    if not isinstance(raw, dict):
        raise catalog_error(path, where, f"a table, got {raw!r}")
    unknown = sorted(set(raw) - {"hold_ns", *GROUPS})
    if unknown:
        raise catalog_error(path, where, f"unknown keys {unknown}; known: hold_ns, {GROUPS}")
    hold_ns = raw.get("hold_ns", DEFAULT_HOLD_NS)
    if not isinstance(hold_ns, int) or isinstance(hold_ns, bool) or hold_ns <= 0:
        raise catalog_error(path, where, f"hold_ns: a positive int of nanoseconds, got {hold_ns!r}")
    if hold_ns > MAX_HOLD_NS or hold_ns >= timeout_s * 1e9:
        raise catalog_error(
            path,
            where,
            f"hold_ns: {hold_ns} ns must fit a signed 64-bit count and be shorter than "
            f"the target's timeout_s ({timeout_s:g} s)",
        )
    groups = {
        group: _holding(path, f"{where}.{group}", raw[group]) for group in GROUPS if group in raw
    }
    if not groups:
        raise catalog_error(path, where, f"names no producers group; give one of {GROUPS}")
    return Publisher(hold_ns, groups)


def _holding(path: Path, where: str, raw) -> Holding:
    if not isinstance(raw, dict):
        raise catalog_error(path, where, f"a table of {HOLDING_KEYS}, got {raw!r}")
    unknown = sorted(set(raw) - set(HOLDING_KEYS))
    if unknown:
        raise catalog_error(path, where, f"unknown keys {unknown}")
    for key in HOLDING_KEYS:
        if key == "cell" and key not in raw:
            continue  # no cell: this group gets no forced order
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            what = "an index expression" if key == "cell" else "a non-empty C condition"
            raise catalog_error(path, where, f"{key}: {what}, got {value!r}")
    if raw["held"].strip() == raw["publisher"].strip():
        raise catalog_error(path, where, "held: must never hold the publisher back")
    return Holding(raw["publisher"], raw["held"], raw["marker"], raw.get("cell"))
