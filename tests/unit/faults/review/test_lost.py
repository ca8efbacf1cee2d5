"""faults/review/lost.py through the review of the CPU fixture's repository:
a change that drops, unbalances or renames a site's annotations; the sites
it broke (where BASE had them), the catalog entries that no longer apply,
and their SARIF results, exactly (docs/review.md, "The pre-merge review")."""

from __future__ import annotations

from pathlib import Path

from faults.review.findings import NO_LONGER_APPLIES, SITE_GONE, findings
from faults.review.model import GoneSite, LostEntry, Review, ReviewVerdict, SiteLoss
from faults.review.static import ContractCheck
from faults.report.sarif import Level, Result
from invariants.sync.finding import Finding
from tests.unit.faults.review.test_review import MAIN_CPP, SRC, fixture_repo, review, reviewed
from tests.unit.faults.review.test_sarif import results

WAIT = "fx.consumer.flag_wait"
WAIT_LOST = [LostEntry("S1", (WAIT,)), LostEntry("S2", (WAIT,))]
GONE_SAID = (
    "gone from the change's tree (its `// @site` lines or its anchor removed or renamed)"
)
BROKEN_SAID = "broken in the change's tree (a site-rule finding names it)"


def without_lines(repo, *needles: str) -> None:
    """The fixture's main.cpp less every line holding one of `needles`."""
    path = repo / MAIN_CPP
    kept = [line for line in path.read_text().splitlines() if not any(n in line for n in needles)]
    path.write_text("\n".join(kept) + "\n")


def lost_results(entries: list[str], line: int) -> list[tuple]:
    return [
        (
            "entry-no-longer-applies",
            "error",
            MAIN_CPP,
            line,
            f"catalog entry {entry} no longer applies: it names {WAIT}, "
            "which the change's tree lacks",
        )
        for entry in entries
    ]


def test_a_dropped_wait_names_its_site_its_primitive_and_its_faults(tmp_path):
    """The issue's example, on the fixture: the wait's `// @site`/`// @end` lines deleted."""
    repo = fixture_repo(tmp_path)
    without_lines(repo, f"@site {WAIT} ", f"@end {WAIT}")
    sarif = tmp_path / "r.sarif"
    status, result = review(repo, "--sarif", str(sarif))
    assert (status, result.verdict) == (1, ReviewVerdict.CHANGES_NEEDED)
    unsited = Finding(MAIN_CPP, 48, "ordering primitive wait_until( outside any site")
    assert result.unsited == [unsited]
    assert result.gone == [GoneSite(WAIT, MAIN_CPP, 48, SiteLoss.GONE)]
    assert result.lost == WAIT_LOST
    assert results(sarif) == [
        (
            "primitive-outside-site",
            "error",
            MAIN_CPP,
            48,
            "ordering primitive wait_until( outside any site",
        ),
        (
            "site-gone",
            "error",
            MAIN_CPP,
            48,
            f"{WAIT}: {GONE_SAID}; at BASE {MAIN_CPP}:48; no longer applying: S1, S2",
        ),
        *lost_results(["S1", "S2"], 48),
    ]


def test_a_site_left_open_is_a_finding_not_an_error(tmp_path):
    """The wait's `// @end` deleted: the next site opens inside it, and its
    `@end` closes the wait's region; both sites are broken, and the faults
    of the wait no longer apply."""
    repo = fixture_repo(tmp_path)
    without_lines(repo, f"@end {WAIT}")
    sarif = tmp_path / "r.sarif"
    status, result = review(repo, "--sarif", str(sarif))
    assert (status, result.verdict) == (1, ReviewVerdict.CHANGES_NEEDED)
    check = "fx.consumer.check"
    opened = f"{WAIT} (opened at line 48)"
    assert result.unsited == [
        Finding(MAIN_CPP, 51, f"site {check} opens inside site {opened}"),
        Finding(MAIN_CPP, 58, f"@end {check} closes site {opened}"),
    ]
    assert result.gone == [
        GoneSite(WAIT, MAIN_CPP, 48, SiteLoss.BROKEN),
        GoneSite(check, MAIN_CPP, 52, SiteLoss.BROKEN),
    ]
    assert result.lost == WAIT_LOST
    assert results(sarif)[2:] == [
        (
            "site-gone",
            "error",
            MAIN_CPP,
            48,
            f"{WAIT}: {BROKEN_SAID}; at BASE {MAIN_CPP}:48; no longer applying: S1, S2",
        ),
        (
            "site-gone",
            "error",
            MAIN_CPP,
            52,
            f"{check}: {BROKEN_SAID}; at BASE {MAIN_CPP}:52",
        ),
        *lost_results(["S1", "S2"], 48),
    ]


def test_an_end_without_its_site_is_a_finding(tmp_path):
    repo = fixture_repo(tmp_path)
    without_lines(repo, "@site fx.producer.flag_release ")
    status, result = review(repo)
    assert (status, result.verdict) == (1, ReviewVerdict.CHANGES_NEEDED)
    assert result.unsited == [
        Finding(MAIN_CPP, 39, "ordering primitive store( outside any site"),
        Finding(MAIN_CPP, 40, "@end fx.producer.flag_release without an open site"),
    ]
    assert result.gone == [
        GoneSite("fx.producer.flag_release", MAIN_CPP, 39, SiteLoss.BROKEN)
    ]
    assert result.lost == [LostEntry("N1", ("fx.producer.flag_release",))]


def test_a_store_site_dropped_leaves_its_release_guarding_nothing(tmp_path):
    """No catalog fault names the store alone but D1, and the release still
    guards it: the site-rule finding names it."""
    repo = fixture_repo(tmp_path)
    without_lines(repo, "@site fx.producer.payload_store ", "@end fx.producer.payload_store")
    status, result = review(repo, "--no-generated")
    assert status == 1
    assert result.gone == [
        GoneSite("fx.producer.payload_store", MAIN_CPP, 36, SiteLoss.BROKEN)
    ]
    assert result.lost == [
        LostEntry("D1", ("fx.producer.payload_store",)),
        LostEntry("S1", ("fx.producer.payload_store",)),
    ]


def test_a_site_renamed_with_its_catalog_is_no_finding(tmp_path):
    """A rename done whole (source, label and catalog) breaks nothing."""
    repo = fixture_repo(tmp_path)
    for name in (MAIN_CPP, f"{SRC}/catalog.toml"):
        path = repo / name
        path.write_text(path.read_text().replace(WAIT, "fx.consumer.flag_poll"))
    status, result = reviewed(["HEAD", "--root", str(repo), "--no-generated"])
    assert (result.gone, result.lost, result.unsited) == ([], [], [])
    assert (status, result.verdict) == (0, ReviewVerdict.OK)


def test_what_no_site_of_base_holds_is_said_at_the_catalog():
    """A site no tree has (the catalog names it, BASE lacks it too) and a
    mutation rule whose twin the change's tree cannot make: their results lie
    at the catalog, with no line; uris from the repository's top."""
    result = Review(
        "main",
        "topic",
        Path("/t"),
        "src",
        {},
        [],
        [],
        ContractCheck(False, [], 0, 0),
        lost=[LostEntry("N4", ("k.typo",)), LostEntry("target.mutation #0 (weaken)", ())],
        gone=[
            GoneSite("k.gone", "src/k.cu", 30, SiteLoss.GONE),
            GoneSite("k.typo", None, None, SiteLoss.GONE),
        ],
    )
    at = "sub/catalog.toml", None
    assert findings(result, Path("sub"), Path("sub/catalog.toml")) == [
        Result(
            SITE_GONE,
            Level.ERROR,
            Finding("sub/src/k.cu", 30, f"{GONE_SAID}; at BASE src/k.cu:30", "k.gone"),
        ),
        Result(
            SITE_GONE,
            Level.ERROR,
            Finding(*at, f"{GONE_SAID}; not in BASE either; no longer applying: N4", "k.typo"),
        ),
        Result(
            NO_LONGER_APPLIES,
            Level.ERROR,
            Finding(
                *at,
                "catalog entry N4 no longer applies: "
                "it names k.typo, which the change's tree lacks",
            ),
        ),
        Result(
            NO_LONGER_APPLIES,
            Level.ERROR,
            Finding(
                *at,
                "catalog entry target.mutation #0 (weaken) no longer applies: "
                "its twin cannot be made from the change's tree",
            ),
        ),
    ]
