"""faults.sweep.sweep: history, changes between sweeps, reports, scores."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path

from faults.judge.scores import scores
from faults.judge.verdict import FaultSummary, repeats_for_confidence, summarize_fault
from faults.sweep.history import History
from tools.faults_cli.main import main

REPO = Path(__file__).parents[4]
CATALOG = REPO / "tests/fixtures/flag_payload/catalog.toml"


def summary(fault: str, verdict: str, expect: str = "fail", ok: bool = True) -> FaultSummary:
    killed = int(verdict == "KILLED")
    return FaultSummary(fault, expect, verdict, ok, 1, 1, killed, float(killed), 1, "")


def test_history_reports_a_verdict_change_and_new_sites(tmp_path):
    history = History(tmp_path / "h.sqlite")
    first = [summary("N2", "KILLED"), summary("P1", "PASSED", "pass")]
    assert history.changes("c", first, ["a.b"], set()).previous is None
    history.record(catalog="c", digest="d1", machine="m", summaries=first, sites=["a.b"])
    second = [summary("N2", "SURVIVED", ok=False), summary("P1", "PASSED", "pass")]
    changes = history.changes("c", second, ["a.b", "a.new"], covered_sites={"a.b"})
    assert changes.previous == 1
    assert changes.verdicts == [("N2", "KILLED", "SURVIVED")]
    assert changes.new_survivors == ["N2"]
    assert changes.new_sites == ["a.new"] and changes.new_sites_without_faults == ["a.new"]
    history.close()


def test_kill_rate_repeats_and_flaky():
    from faults.catalog import Fault
    from faults.judge.run_result import RunResult

    fault = Fault("N", "t", "fail", ())
    run = lambda v: RunResult("N", "c", 0, v, v == "KILLED", v, "d")  # noqa: E731
    flaky = summarize_fault(
        fault, [run("KILLED"), run("SURVIVED"), run("KILLED"), run("NOT FIRED")]
    )
    assert (flaky.verdict, flaky.fired, flaky.killed) == ("FLAKY", 3, 2)
    assert flaky.kill_rate == round(2 / 3, 4) and flaky.repeats_for_99 == 5
    assert repeats_for_confidence(1.0) == 1 and repeats_for_confidence(0.0) is None
    assert repeats_for_confidence(0.5) == 7  # 0.5 ** 7 < 0.01 < 0.5 ** 6
    assert summarize_fault(fault, [run("NOT FIRED")]).verdict == "NOT FIRED"
    assert scores([summary("A", "KILLED"), summary("B", "SURVIVED", ok=False)]) == (0.5, 1.0)


def test_a_partial_sweep_hides_no_fault_from_the_next(tmp_path):
    history = History(tmp_path / "h.sqlite")
    full = [summary("N2", "KILLED"), summary("N3", "KILLED")]
    history.record(catalog="c", digest="d", machine="m", summaries=full, sites=["a", "b"])
    history.record(catalog="c", digest="d", machine="m", summaries=full[:1], sites=["a"])
    # N3 was left out of the last (partial) sweep: it is held against its own last verdict.
    changes = history.changes("c", [summary("N3", "SURVIVED", ok=False)], ["a", "b"], set())
    assert changes.verdicts == [("N3", "KILLED", "SURVIVED")]
    assert changes.new_survivors == ["N3"] and changes.new_sites == []
    history.close()


def test_two_sweeps_of_the_fixture_report_what_changed(tmp_path, capsys):
    history = tmp_path / "history.sqlite"
    base = ["--catalog", str(CATALOG), "--root", str(REPO), "--workdir", str(tmp_path / "w")]
    base += ["sweep", "--only", "D1|S1", "--history", str(history)]
    assert main([*base, "--results-dir", str(tmp_path / "one")]) == 0
    [report] = (tmp_path / "one").glob("sweep-*.json")  # sweep-<machine>.json
    document = json.loads(report.read_text())
    assert [(f["fault"], f["verdict"]) for f in document["faults"]] == [
        ("D1", "PASSED"),
        ("S1", "KILLED"),
    ]
    assert document["mutation_score"] == 1.0 and document["firing_rate"] == 1.0
    assert document["harness_ok"] and document["ok"]
    suite = ET.parse(report.with_suffix(".xml")).getroot()
    assert suite.get("tests") == "4" and suite.get("failures") == "0"
    # The second night, D1 no longer fires: the report says so.
    changed = tmp_path / "catalog.toml"
    changed.write_text(
        CATALOG.read_text().replace(
            'action = "delay", ns = 200_000_000 }]',
            'action = "delay", ns = 200_000_000, when = "round_idx < 0" }]',
            1,
        )
    )
    base[1] = str(changed)
    assert main([*base, "--results-dir", str(tmp_path / "two")]) == 1
    [markdown_report] = (tmp_path / "two").glob("sweep-*.md")
    markdown = markdown_report.read_text()
    assert "## Changed since sweep" in markdown
    assert "- D1: PASSED -> NOT FIRED" in markdown
    capsys.readouterr()


def test_a_broken_harness_is_reported_not_a_table_of_not_fired():
    from faults.report.markdown import markdown

    control = {"fault": "control.forced_fail", "config": "arm-attention", "verdict": "SURVIVED"}
    document = {
        "catalog": "c.toml",
        "native_source_sha256": "ab" * 32,
        "machine": "2xH200",
        "written": "now",
        "mutation_score": None,
        "firing_rate": None,
        "runnable": True,
        "harness_ok": False,
        "controls": [{**control, "ok": False}],
        "faults": [],
    }
    text = markdown(document)
    assert "control.forced_fail/arm-attention SURVIVED" in text
    assert text.endswith(
        "**Harness broken, no fault judged:** control.forced_fail under arm-attention: SURVIVED\n"
    )
    assert "| fault |" not in text


def test_gpu_needs_are_said_per_config():
    from faults.report.markdown import _needs

    needs = {"bf16-eager": 2, "4gpu-f1": 4, "fp8-eager": 2}
    assert _needs(needs) == "2 for bf16-eager, fp8-eager; 4 for 4gpu-f1"


def test_survivors_are_said_in_full_below_the_table():
    from faults.report.markdown import markdown

    known = "the gate only holds the copies back; " + "x" * 200
    faults = [
        {
            **asdict(summary("gen.skip.a", "SURVIVED")),
            "reason": f"hint: h; known survivor: {known}",
        },
        {**asdict(summary("N2", "FLAKY", ok=False)), "reason": "killed in 7 of 12 runs"},
        {**asdict(summary("N3b", "KILLED")), "reason": "the run failed and said why"},
    ]
    document = {
        "catalog": "c.toml",
        "native_source_sha256": "ab" * 32,
        "machine": "2xH200",
        "written": "now",
        "mutation_score": 0.5,
        "firing_rate": 1.0,
        "runnable": True,
        "harness_ok": True,
        "controls": [],
        "faults": faults,
    }
    text = markdown(document)
    said = text.split("## Must-fail faults that survived a run\n\n")[1].splitlines()
    assert said == [
        f"- gen.skip.a: SURVIVED, explained: hint: h; known survivor: {known}",
        "- N2: FLAKY, NOT explained: killed in 7 of 12 runs",
    ]


def test_a_sweep_without_gpus_says_what_it_built_as_it_is():
    from faults.report.markdown import markdown

    rows = [
        {"fault": "A", "state": "built", "tree_digest": "ab" * 32, "apply_s": 0.1, "build_s": 1},
        {
            "fault": "B",
            "state": "BUILD ERROR",
            "tree_digest": "cd" * 32,
            "apply_s": 0,
            "build_s": 1,
        },
    ]
    document = {
        "catalog": "c.toml",
        "native_source_sha256": "ab" * 32,
        "machine": "cpu",
        "written": "now",
        "mutation_score": None,
        "firing_rate": 0.0,
        "runnable": False,
        "harness_ok": False,
        "controls": [],
        "gpus_needed": {"bf16": 2},
        "gpu_runs_needed": ["A:bf16", "B:bf16"],
        "built": rows,
    }
    text = markdown(document)
    assert "- mutation score n/a (nothing to count) (killed / must-fail that fired)" in text
    assert (
        "2 (fault, config) runs are listed in the JSON; 1 of 2 trees built; 1 not ok "
        "(BUILD ERROR first):" in text
    )
    assert "every fault" not in text
    document["built"] = rows[:1]
    assert "every fault (1) was applied and built:" in markdown(document)
    erased = {**rows[0], "fault": "M", "state": "ERASED", "ok": True}
    document["built"] = [rows[0], erased]
    assert "; 2 of 2 trees built, 1 ERASED (SASS identical to the clean tree's):" in markdown(
        document
    )


def judged(fault: str, expect: str, verdict: str, ok: bool, fired_runs, rate, need, reason):
    """One row of a sweep document's `faults`, as the JSON holds it."""
    fired, runs = fired_runs
    return {
        **{"fault": fault, "expect": expect, "verdict": verdict, "ok": ok},
        **{"fired": fired, "runs": runs, "kill_rate": rate, "repeats_for_99": need},
        "reason": reason,
    }


FULL_DOCUMENT = {
    "catalog": "c.toml",
    "native_source_sha256": "ab" * 32,
    "machine": "2xH200",
    "written": "2025-01-02T03:04:05",
    "mutation_score": 0.5,
    "firing_rate": 0.75,
    "runnable": True,
    "harness_ok": True,
    "controls": [
        {"fault": "control.forced_fail", "config": "bf16", "verdict": "KILLED", "ok": True}
    ],
    "faults": [
        {**judged("D1", "pass", "PASSED", True, (2, 2), None, None, ""), "markers": {"c": 16}},
        {
            **judged("S1", "fail", "KILLED", True, (2, 2), 1.0, 1, "mismatch | 16 lines\nsecond"),
            "markers": {"c": 8, "c@2048": 11332},
        },
        judged("S2", "fail", "SURVIVED", True, (2, 2), 0.0, None, "hint: h;\n known survivor:  k"),
        judged("N2", "fail", "FLAKY", False, (3, 4), 0.3333, 12, "killed in 1 of 3 runs"),
    ],
    "results": [  # D1 fired under c alone; S2 under neither (its own table row says so)
        {"fault": "D1", "config": "c", "verdict": "PASSED", "outcome": {"markers": {"D1": 3}}},
        {"fault": "D1", "config": "c@2048", "verdict": "NOT FIRED", "outcome": {"markers": {}}},
        {"fault": "S2", "config": "c", "verdict": "NOT FIRED", "outcome": {"markers": {}}},
    ],
    "changes": {
        "previous": 1,
        "verdicts": [["S1", "SURVIVED", "KILLED"]],
        "new_survivors": ["S2"],
        "new_sites": ["fx.a", "fx.b"],
        "new_sites_without_faults": ["fx.b"],
    },
}

FULL_MARKDOWN = """\
# Fault sweep: c.toml

- tree `abababababab` on 2xH200, 2025-01-02T03:04:05
- mutation score 0.5 (killed / must-fail that fired), firing rate 0.75
- controls: control.forced_fail/bf16 KILLED

| fault | expect | verdict | ok | fired/runs | markers | kill rate | repeats for 99 % | why |
|---|---|---|---|---|---|---|---|---|
| D1 | pass | PASSED | yes | 2/2 | 16 |  |  |  |
| S1 | fail | KILLED | yes | 2/2 | c 8, c@2048 11,332 | 1.00 | 1 | mismatch / 16 lines |
| S2 | fail | SURVIVED | yes | 2/2 |  | 0.00 |  | hint: h; |
| N2 | fail | FLAKY | NO | 3/4 |  | 0.33 | 12 | killed in 1 of 3 runs |

## Must-fail faults that survived a run

- S2: SURVIVED, explained: hint: h; known survivor: k
- N2: FLAKY, NOT explained: killed in 1 of 3 runs

## Faults that fired under some configs only

- D1: never fired under c@2048; fired under c

## Changed since sweep 1

- S1: SURVIVED -> KILLED
- new survivor: S2
- new site without a catalog fault: fx.b
"""


def test_a_full_document_renders_exactly():
    """Header, verdict table, survivors, faults fired under some configs
    only, and changes, byte for byte."""
    from faults.report.markdown import markdown

    assert markdown(FULL_DOCUMENT) == FULL_MARKDOWN


def test_the_other_endings_render_exactly():
    """The built table (no GPUs), the broken harness, and changes with nothing
    to say: the sections a full document has not, byte for byte."""
    from faults.report.markdown import markdown

    header = FULL_MARKDOWN.split("| fault |")[0]
    unchanged = {
        **FULL_DOCUMENT,
        "faults": FULL_DOCUMENT["faults"][:2],
        "results": [],
        "changes": {
            "previous": "p",
            "verdicts": [],
            "new_survivors": [],
            "new_sites": [],
            "new_sites_without_faults": [],
        },
    }
    assert markdown(unchanged) == (
        FULL_MARKDOWN.split("| S2 |")[0] + "\n## Changed since sweep p\n\n- nothing\n"
    )
    broken_control = {"fault": "control.forced_fail", "config": "bf16", "verdict": "SURVIVED"}
    broken = {**FULL_DOCUMENT, "harness_ok": False, "controls": [{**broken_control, "ok": False}]}
    assert markdown(broken) == (
        header.replace("bf16 KILLED", "bf16 SURVIVED")
        + "**Harness broken, no fault judged:** control.forced_fail under bf16: SURVIVED\n"
    )
    row = {"fault": "A", "state": "built", "tree_digest": "cd" * 32, "apply_s": 0.1, "build_s": 2}
    unbuilt = {
        **FULL_DOCUMENT,
        **{"runnable": False, "harness_ok": False, "controls": [], "built": [row]},
        **{"gpus_needed": {"bf16": 2, "fp8": 2}, "gpu_runs_needed": ["A:bf16", "A:fp8"]},
    }
    assert markdown(unbuilt) == (
        header.replace(
            "- controls: control.forced_fail/bf16 KILLED", "- controls: not run (no GPUs)"
        )
        + "Runs need GPUs (2 for bf16, fp8): 2 (fault, config) runs are listed in the JSON; "
        "every fault (1) was applied and built:\n"
        "\n"
        "| fault | state | tree | apply s | build s |\n"
        "|---|---|---|---|---|\n"
        "| A | built | `cdcdcdcd` | 0.1 | 2 |\n"
    )
    one_gpu = markdown({**unbuilt, "logical_ranks": True})
    assert (
        "Runs need GPUs (2 for bf16, fp8; or all on one GPU as logical ranks, the default "
        "with fewer GPUs): 2 (fault, config) runs" in one_gpu
    )


def test_the_mutation_score_is_one_computation_overall_and_per_family():
    """An EQUIVALENT or ERASED mutant is outside the score, overall as in its
    family's (they once disagreed: 0.6 and 0.75 for the fixture's sweep)."""
    from faults.judge.scores import family_scores

    summaries = [
        summary("S1", "KILLED"),
        summary("gen.skip.a", "KILLED"),
        summary("S2", "SURVIVED"),
        summary("gen.publish-early.a", "EQUIVALENT"),
        summary("gen.x.a", "ERASED"),
        summary("N1", "NOT FIRED", "pass", ok=False),
    ]
    assert scores(summaries) == (round(2 / 3, 4), 1.0)
    [row] = family_scores(summaries).values()
    assert (row["score"], row["equivalent"], row["erased"]) == (round(2 / 3, 4), 1, 1)


def faults_command(*words: str, cwd: Path = REPO):
    """`python -m faults WORDS` as a user runs it on a CPU machine."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("AFDEP_")}
    env.update(PYTHONPATH=str(REPO), CUDA_VISIBLE_DEVICES="")
    return subprocess.run(
        [sys.executable, "-m", "faults", *words],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_fixtures_sweep_says_why_it_exits_1_and_files_under_its_target(tmp_path):
    """The fixture's whole sweep exits 1 by design (N1 never fires) and for
    its publish-early mutant, which survives with nothing to explain it (the
    fixture configures no contract, so no mutant is EQUIVALENT): its last
    line says so; its score is the families'; a partial sweep of the same
    catalog into the same folder takes another name and leaves it whole."""
    results = tmp_path / "results"
    top = ["--catalog", str(CATALOG), "--root", str(REPO), "--workdir", str(tmp_path / "w")]
    full = faults_command(*top, "sweep", "--results-dir", str(results))
    assert full.returncode == 1, full.stderr
    lines = full.stdout.splitlines()
    assert lines[-2:] == [
        f"reports: {results}/sweep-cpu-flag_payload.json .md .xml",
        "exit 1: 2 faults missed the expectation: N1 (expect pass: NOT FIRED), "
        "gen.publish-early.fx.producer.flag_release (expect fail: SURVIVED)",
    ]
    document = json.loads((results / "sweep-cpu-flag_payload.json").read_text())
    families = document["mutation_score_by_family"].values()
    killed = sum(row["killed"] for row in families)
    judged = sum(
        row[c]
        for row in families
        for c in ("killed", "survived", "unobservable", "flaky", "hung", "broke")
    )
    assert (killed, judged, document["mutation_score"]) == (3, 5, 0.6)
    assert "- mutation score 0.6 (killed / must-fail that fired), firing rate 0.9" in lines
    assert (document["target"], document["only"]) == ("flag_payload", [])
    before = (results / "sweep-cpu-flag_payload.json").read_text()
    partial = faults_command(*top, "sweep", "--only", "D1", "--results-dir", str(results))
    assert partial.returncode == 0, partial.stderr
    assert partial.stdout.splitlines()[-1] == (
        f"reports: {results}/sweep-cpu-flag_payload-partial.json .md .xml"
    )
    assert (results / "sweep-cpu-flag_payload.json").read_text() == before
    assert json.loads((results / "sweep-cpu-flag_payload-partial.json").read_text())["only"] == [
        "D1"
    ]


def test_a_sweep_without_the_gpus_says_so_at_its_start(tmp_path):
    """On a CPU the afdep sweep says first that it found no GPU and will
    apply and build only, with the runs that need GPUs."""
    from faults.report.markdown import _needs

    results = tmp_path / "results"
    done = faults_command(
        *("--catalog", str(REPO / "catalogs/afdep.toml"), "--no-generated"),
        *("sweep", "--only", "P1", "--results-dir", str(results)),
    )
    assert done.returncode == 0, done.stderr
    document = json.loads((results / "sweep-cpu-afdep-partial.json").read_text())
    runs, needs = len(document["gpu_runs_needed"]), _needs(document["gpus_needed"])
    first = done.stdout.splitlines()[0]  # after its progress lead (seconds, count)
    assert first.endswith(
        f"]  no GPU found: applying and building every fault only, no run; its {runs} runs need "
        f"GPUs ({needs}), listed in the report"
    ), first
    assert runs > 0 and "bf16-eager" in needs


def test_a_cpu_report_names_its_target_and_a_partial_sweep_gpu_reports_keep_their_names():
    from faults.report.document import SweepReport

    def stem(**fields) -> str:
        return SweepReport(**fields).stem(Path("out")).name

    assert stem(machine="cpu", target="afdep") == "sweep-cpu-afdep"
    assert stem(machine="cpu", target="afdep", only=["P1"]) == "sweep-cpu-afdep-partial"
    assert stem(machine="cpu", target="a b/c", not_selected=["X"]) == "sweep-cpu-a-b-c-partial"
    assert stem(machine="2xH200", target="afdep", only=["P1"]) == "sweep-2xH200"
    assert stem(machine="1xH200", target="afdep", rank_mode="logical") == "sweep-1xH200-logical"
