"""The catalog's checks of a delay's schedule and [target.schedule]
(docs/operators.md, "Seeded schedules and replay"), each error one line
naming the fault, the patch and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.catalog import CatalogError
from faults.catalog.load import catalog_from_tables

REPO = Path(__file__).parents[4]
AFDEP = REPO / "catalogs/afdep.toml"


def tables(**changes) -> dict:
    """The afdep catalog's tables with a scheduled delay patch changed."""
    import tomllib

    data = tomllib.loads(AFDEP.read_text())
    fault = next(f for f in data["fault"] if f["id"] == "P1s.pct")
    fault["patches"][0]["schedule"] = {"family": "pct", **changes}
    return data


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"family": "lottery"}, "family: 'lottery' is not one of ['pct', 'uneven']"),
        ({"over": "warp"}, "over: a pct schedule takes none"),
        ({"seed": -1}, "seed: an int >= 0, got -1"),
        ({"changes": 0}, "changes: an int in 1..64, got 0"),
    ],
)
def test_a_bad_schedule_is_named(changes, message):
    with pytest.raises(CatalogError) as error:
        catalog_from_tables(AFDEP, tables(**changes))
    assert str(error.value) == f"{AFDEP}: fault P1s.pct patch #0 schedule: {message}"


def test_a_pct_schedule_needs_its_sites_step():
    data = tables()
    del data["target"]["schedule"]["step"]["cf.attention_dispatch.row_store"]
    with pytest.raises(CatalogError) as error:
        catalog_from_tables(AFDEP, data)
    assert str(error.value) == (
        f"{AFDEP}: fault P1s.pct patch #0 schedule: a pct schedule needs [target.schedule] "
        "step.'cf.attention_dispatch.row_store', the site's step"
    )
    del data["target"]["schedule"]
    with pytest.raises(CatalogError) as error:
        catalog_from_tables(AFDEP, data)
    assert str(error.value).endswith(
        "schedule: the target has no [target.schedule] table spelling warp, lane and cta"
    )
