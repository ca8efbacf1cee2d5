"""Amplification on the CPU (docs/operators.md, "Amplification"): every
litmus variant compiles with NVRTC, the real catalog's mutants map to their
exact shapes, the bounds' arithmetic, the verdicts, the report's table and
the command's one-line errors. The runs themselves are tests/gpu/test_amplify.py."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from afdep.jit import source_digest
from faults.amplify.compile import compile_litmus, nvrtc_available
from faults.amplify.device import AmplifyError, Geometry, LitmusRun, Stress, plan_geometry
from faults.amplify.report import (
    document,
    harness_verdict,
    judge,
    markdown,
    rate_upper_bound,
    reproducibility,
    Unjudged,
)
from faults.amplify.shapes import Publish, Read, Shape, Wait, amplified, control_of
from faults.catalog import load_catalog
from faults.generate.site_faults import with_generated
from faults.judge.verdict import Verdict
from faults.operators import Family
from faults.pipeline.scratch import tree_digest
from invariants.sync.sites import Group
from tools.faults_cli.main import main
from tools.faults_cli.steps import program

REPO = Path(__file__).parents[4]
CATALOG = with_generated(load_catalog(REPO / "catalogs/afdep.toml"), REPO)
SOURCES = REPO / CATALOG.target.sources
MAPPED = {m.fault_id: m for m in amplified(CATALOG, REPO)}

needs_nvrtc = pytest.mark.skipif(nvrtc_available() is not None, reason=str(nvrtc_available()))

# One shape per value of every template parameter, each beside the defaults.
VARIANTS = (
    [Shape(publish=p) for p in Publish]
    + [Shape(wait=w) for w in Wait]
    + [
        Shape(producers=g, producer_barrier=b)
        for g in Group
        if g is not Group.GRID
        for b in (True, False)
    ]
    + [Shape(consumers=g) for g in (Group.THREAD, Group.WARP, Group.BLOCK)]
    + [Shape(read=r) for r in Read]
)


@needs_nvrtc
@pytest.mark.parametrize("shape", VARIANTS, ids=lambda s: s.label())
def test_every_litmus_variant_compiles_on_the_cpu(shape):
    compiled = compile_litmus(shape, SOURCES)
    assert compiled.symbol.startswith("_ZN6litmus9mp_litmus")
    assert compiled.cubin[:4] == b"\x7fELF"


@needs_nvrtc
def test_every_shape_the_catalog_maps_to_compiles():
    shapes = {m.shape for m in MAPPED.values() if m.shape is not None}
    assert len(shapes) == 11
    for shape in shapes | {control_of(s) for s in shapes}:
        assert compile_litmus(shape, SOURCES).cubin


def test_the_litmus_source_lies_outside_the_kernel_sources_and_the_digests_agree():
    assert tree_digest(SOURCES) == source_digest()
    assert not (SOURCES / "litmus.cuh").exists()


def test_the_real_catalog_maps_its_order_mutants():
    families = {}
    for mapped in MAPPED.values():
        families[mapped.family] = families.get(mapped.family, 0) + 1
    assert families == {
        Family.REMOVE_BARRIER: 9,
        Family.REMOVE_WARP_SYNC: 4,
        Family.WEAKEN_RELEASE: 6,
        Family.WEAKEN_ACQUIRE: 7,
        Family.REMOVE_FENCE: 4,
        Family.NARROW_SCOPE: 17,
    }


EXACT = {
    # lane 0 publishes a warp's rows with st.relaxed.sys after the __syncwarp
    "gen.weaken-release.cf.attention_dispatch.row_release": Shape(
        Publish.RELAXED_SYS, Wait.ACQUIRE_SYS, Group.WARP, True, Group.WARP
    ),
    # the fence before the store stays: fence + relaxed store is still a publish
    "gen.weaken-release.cf.attention_dispatch.count_release": Shape(
        Publish.FENCE_RELAXED_SYS, Wait.ACQUIRE_SYS, Group.BLOCK, True, Group.BLOCK
    ),
    "gen.weaken-acquire.cb.attention_combine.row_wait": Shape(
        Publish.RELEASE_SYS, Wait.RELAXED_SYS, Group.WARP, True, Group.WARP
    ),
    # the red.release after the removed fence publishes alone
    "gen.remove-fence.pf.attention_dispatch.done_release": Shape(
        Publish.RELEASE_SYS, Wait.ACQUIRE_SYS, Group.BLOCK, True, Group.BLOCK
    ),
    "gen.narrow-scope.cf.attention_dispatch.count_release.1": Shape(
        Publish.RELEASE_SYS, Wait.ACQUIRE_SYS, Group.BLOCK, True, Group.BLOCK
    ),
    "gen.narrow-scope.cf.attention_dispatch.count_release.2": Shape(
        Publish.RELEASE_GPU, Wait.ACQUIRE_SYS, Group.BLOCK, True, Group.BLOCK
    ),
    "gen.narrow-scope.cf.ffn_stream_expand.row_wait": Shape(
        Publish.RELEASE_SYS, Wait.ACQUIRE_GPU, Group.WARP, True, Group.WARP
    ),
    "gen.remove-barrier.cf.attention_dispatch.done_release": Shape(
        Publish.RELEASE_SYS, Wait.ACQUIRE_SYS, Group.BLOCK, False, Group.BLOCK
    ),
}


@pytest.mark.parametrize("fault_id", sorted(EXACT))
def test_a_real_mutant_maps_to_its_exact_shape(fault_id):
    assert MAPPED[fault_id].shape == EXACT[fault_id]


def test_a_wait_barrier_removed_is_not_mapped_and_says_why():
    mapped = MAPPED["gen.remove-barrier.cf.ffn_stream_expand.gate_wait"]
    assert mapped.shape is None
    assert (
        mapped.why == "a consumer barrier removed is a plain race, not an order; the runs show it"
    )


def test_the_name_expression_names_every_template_argument():
    assert EXACT["gen.remove-barrier.cf.attention_dispatch.done_release"].name_expression() == (
        "litmus::mp_litmus<litmus::Publish::kReleaseSys, litmus::Wait::kAcquireSys, "
        "litmus::Read::kL2, litmus::Group::kBlock, false, litmus::Group::kBlock, 8, 256>"
    )
    cached = replace(EXACT["gen.weaken-acquire.cb.attention_combine.row_wait"], read=Read.CACHED)
    assert "litmus::Wait::kRelaxedSys, litmus::Read::kCached, " in cached.name_expression()
    assert cached.label().startswith("publish=release.sys wait=relaxed.sys read=ld ")


def test_reproducibility_is_one_minus_e_to_the_minus_k():
    assert reproducibility(0) == 0.0
    assert reproducibility(1) == 1 - math.exp(-1) == 0.6321205588285577
    assert reproducibility(3) == 0.950212931632136
    assert rate_upper_bound(0, 300) == 0.01
    assert rate_upper_bound(2, 300) is None
    assert rate_upper_bound(0, 0) is None


def run(shape: Shape, stress: Stress, observed: int, weak: int) -> LitmusRun:
    return LitmusRun(shape, stress, launches=10, observed=observed, weak=weak, seconds=1.5)


RELAXED = EXACT["gen.weaken-release.cf.attention_dispatch.row_release"]
OK = (True, "2 control runs, 0 weak outcomes")


def test_a_mutant_killed_under_stress_is_killed_with_its_counts():
    mapped = MAPPED["gen.weaken-release.cf.attention_dispatch.row_release"]
    runs = {RELAXED: [run(RELAXED, Stress.NONE, 1000, 0), run(RELAXED, Stress.MEMORY, 1000, 3)]}
    judged = judge(mapped, runs, 1, OK)
    assert (judged.verdict, judged.reason) == (
        Verdict.KILLED,
        "weak outcomes 0/1000 under none, 3/1000 under memory",
    )


def test_a_mutant_never_killed_is_unobservable_and_the_contract_its_catch():
    mapped = MAPPED["gen.weaken-release.cf.attention_dispatch.row_release"]
    runs = {RELAXED: [run(RELAXED, Stress.NONE, 1000, 0), run(RELAXED, Stress.MEMORY, 500, 0)]}
    judged = judge(mapped, runs, 1, OK)
    assert (judged.verdict, judged.reason) == (
        Verdict.UNOBSERVABLE,
        "no weak outcome in 1500 observations on this machine: "
        "the static contract is its only catch",
    )


def test_narrow_scope_on_one_gpu_is_unobservable_without_a_run():
    judged = judge(MAPPED["gen.narrow-scope.cf.attention_dispatch.count_release.2"], {}, 1, OK)
    assert (judged.verdict, judged.reason) == (
        Verdict.UNOBSERVABLE,
        "gpu scope is enough within one GPU: a one-GPU litmus cannot show it; "
        "the static contract is its only catch",
    )


def test_a_correct_litmus_is_equivalent_and_a_broken_harness_judges_nothing():
    equivalent = judge(MAPPED["gen.remove-fence.pf.attention_dispatch.done_release"], {}, 1, OK)
    assert equivalent.verdict is Verdict.EQUIVALENT
    fenced = EXACT["gen.weaken-release.cf.attention_dispatch.count_release"]
    ran = [run(fenced, Stress.MEMORY, 700, 0)]
    judged = judge(
        MAPPED["gen.weaken-release.cf.attention_dispatch.count_release"], {fenced: ran}, 1, OK
    )
    assert (judged.verdict, judged.runs) == (Verdict.EQUIVALENT, ran)
    control = control_of(RELAXED)
    harness = harness_verdict(
        [run(control, Stress.NONE, 100, 0), run(control, Stress.MEMORY, 100, 2)]
    )
    assert harness == (
        False,
        "the harness is broken: a correct litmus showed weak outcomes (publish=release.sys "
        "wait=acquire.sys read=ld.cg producers=warp consumers=warp under memory: 2)",
    )
    runs = {RELAXED: [run(RELAXED, Stress.NONE, 1000, 5)]}
    judged = judge(MAPPED["gen.weaken-release.cf.attention_dispatch.row_release"], runs, 1, harness)
    assert judged.verdict is Unjudged.NOT_JUDGED
    assert harness_verdict([run(control, Stress.NONE, 0, 0)]) == (
        False,
        "the harness is broken: no control observed a flag",
    )


def test_the_report_table_has_one_line_per_run():
    mapped = MAPPED["gen.weaken-release.cf.attention_dispatch.row_release"]
    control = control_of(RELAXED)
    runs = {RELAXED: [run(RELAXED, Stress.NONE, 1000, 0), run(RELAXED, Stress.MEMORY, 1000, 3)]}
    controls = [run(control, Stress.NONE, 2000, 0)]
    header = {
        "machine": "1xH200",
        "rank_mode": "one process; the litmus CTAs on GPU 0",
        "placement": "placement: 49 pairs",
        "source_digest": "a" * 64,
        "litmus_digest": "b" * 64,
        "stress": ["none", "memory"],
        "nvlink": "NVLink stress: not available (1 GPU: it needs 2)",
    }
    narrowed = MAPPED["gen.narrow-scope.cf.attention_dispatch.count_release.2"]
    judged = [judge(mapped, runs, 1, OK), judge(narrowed, runs, 1, OK)]
    lines = markdown(document(judged, controls, harness_verdict(controls), header)).splitlines()
    assert lines[:12] == [
        "# Amplification on 1xH200",
        "",
        "- source digest aaaaaaaaaaaa, litmus digest bbbbbbbbbbbb",
        "- rank mode: one process; the litmus CTAs on GPU 0; placement: 49 pairs",
        "- stress: none, memory; NVLink stress: not available (1 GPU: it needs 2)",
        "- harness: 1 control runs, 0 weak outcomes",
        "",
        "| mutant | litmus | stress | kills k | observations n | rate | 1-e^-k | verdict |",
        "|---|---|---|---|---|---|---|---|",
        "| control | release.sys / acquire.sys (warp -> warp) | none | 0 | 2000 | < 0.0015 "
        "| 0.000 | control |",
        "| gen.weaken-release.cf.attention_dispatch.row_release "
        "| relaxed.sys / acquire.sys (warp -> warp) "
        "| none | 0 | 1000 | < 0.003 | 0.000 | KILLED |",
        "| gen.weaken-release.cf.attention_dispatch.row_release "
        "| relaxed.sys / acquire.sys (warp -> warp) "
        "| memory | 3 | 1000 | 0.003 | 0.950 | KILLED |",
    ]
    assert lines[12] == (
        "| gen.narrow-scope.cf.attention_dispatch.count_release.2 | release.gpu / acquire.sys "
        "(block -> block) | - | - | - | - | - | UNOBSERVABLE |"
    )


def test_a_geometry_that_cannot_be_resident_is_refused():
    assert plan_geometry(132, 1, None, (Stress.NONE, Stress.MEMORY)) == Geometry(132, 1, 49, 34)
    assert plan_geometry(132, 1, 66, (Stress.NONE,)) == Geometry(132, 1, 66, 0)
    with pytest.raises(AmplifyError) as refused:
        plan_geometry(132, 1, 70, (Stress.NONE,))
    assert str(refused.value) == (
        "amplify: --pairs 70: 140 CTAs (140 litmus + 0 stress) cannot all be resident: "
        "the GPU holds 1 per SM x 132 SMs = 132"
    )


def amplify(tmp_path, *args: str) -> int:
    return main(["--root", str(REPO), "amplify", "--results-dir", str(tmp_path), *args])


BAD = [
    (
        ["--no-run", "--stress", "nvlink"],
        "amplify: --stress nvlink needs 2 GPUs, this machine has 0",
    ),
    (
        ["--no-run", "--only", "("],
        "amplify: --only '(': not a regular expression: "
        "missing ), unterminated subpattern at position 0",
    ),
    (
        ["--no-run", "--only", "gen.delay.*"],
        "amplify: --only 'gen.delay.*' matches no order-weakening mutant",
    ),
    ([], "amplify: no GPU here (--no-run maps the mutants and compiles only)"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_is_one_line_naming_the_argument(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.setattr("tools.faults_cli.amplify.gpu_count", lambda: 0)
    assert amplify(tmp_path, *args) == 2
    assert capsys.readouterr().err == f"{program()}: error: {message}\n"


def test_a_budget_of_no_time_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        amplify(tmp_path, "--budget-s", "0")
    assert exit.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: argument --budget-s: seconds above 0, got '0'\n"
    )


@needs_nvrtc
def test_no_run_maps_compiles_and_writes_the_report(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("tools.faults_cli.amplify.gpu_count", lambda: 0)
    monkeypatch.setattr("faults.amplify.plan.machine_name", lambda: "cpu")
    only = (
        r"gen\.(weaken-acquire\.cb\.attention_combine\.row_wait"
        r"|narrow-scope\.cf\.attention_dispatch\.row_release)"
    )
    assert amplify(tmp_path, "--no-run", "--only", only) == 0

    doc = json.loads((tmp_path / "amplify-cpu.json").read_text())
    assert doc["source_digest"] == source_digest()
    assert [(m["id"], m["verdict"]) for m in doc["mutants"]] == [
        ("gen.weaken-acquire.cb.attention_combine.row_wait", "NOT RUN"),
        ("gen.narrow-scope.cf.attention_dispatch.row_release", "UNOBSERVABLE"),
    ]
    assert doc["harness_ok"] is None
    assert (tmp_path / "amplify-cpu.md").read_text().startswith("# Amplification on cpu\n")
    assert doc["mutants"][0]["shape"]["read"] == "ld.cg"  # the kernels' reads by default
    assert amplify(tmp_path, "--no-run", "--only", only, "--read", "cached") == 0
    doc = json.loads((tmp_path / "amplify-cpu.json").read_text())
    assert doc["mutants"][0]["shape"]["read"] == "ld"


@needs_nvrtc
def test_narrow_scope_alone_on_one_gpu_runs_nothing_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr("tools.faults_cli.amplify.gpu_count", lambda: 1)
    monkeypatch.setattr("faults.amplify.plan.machine_name", lambda: "1xH200")
    assert (
        amplify(tmp_path, "--only", r"gen\.narrow-scope\.cf\.attention_dispatch\.row_release") == 0
    )
    doc = json.loads((tmp_path / "amplify-1xH200.json").read_text())
    assert doc["harness"] == (
        "not run (no chosen mutant has a litmus to run here): "
        "the mutants are mapped and their litmus compiled"
    )
    assert doc["nvlink"] == "NVLink stress: not available (1 GPU: it needs 2)"
    [mutant] = doc["mutants"]
    assert (mutant["verdict"], mutant["runs"]) == ("UNOBSERVABLE", [])


def test_two_gpus_run_a_narrowed_scope_across_them_with_its_own_control():
    from faults.amplify.plan import plan_shapes

    chosen = [MAPPED["gen.narrow-scope.cf.attention_dispatch.row_release"]]
    across = Shape(
        Publish.RELEASE_GPU, Wait.ACQUIRE_SYS, Group.WARP, True, Group.WARP, across_gpus=True
    )
    assert plan_shapes(chosen, 2) == ([control_of(across)], [across])
    assert control_of(across).across_gpus is True
    assert plan_shapes(chosen, 1) == ([], [])
    runs = {across: [run(across, Stress.NONE, 1000, 2)]}
    judged = judge(chosen[0], runs, 2, OK)
    assert (judged.verdict, judged.reason) == (Verdict.KILLED, "weak outcomes 2/1000 under none")


def test_the_launches_of_a_step_put_every_role_where_it_belongs():
    from faults.amplify.device import Part, launch_parts

    geometry = Geometry(132, 8, 49, 34)
    one = EXACT["gen.weaken-acquire.cb.attention_combine.row_wait"]
    across = Shape(Publish.RELEASE_GPU, across_gpus=True)
    assert launch_parts(one, Stress.NONE, geometry) == [Part(0, 98, 0)]
    assert launch_parts(one, Stress.MEMORY, geometry) == [Part(0, 132, 0)]
    assert launch_parts(across, Stress.NONE, geometry) == [Part(0, 49, 0), Part(1, 49, 49)]
    assert launch_parts(across, Stress.MEMORY, geometry)[2] == Part(1, 34, 98)
    assert launch_parts(across, Stress.NVLINK, geometry)[2] == Part(0, 34, 98)


# tests/fixtures/flag_payload_anchored with a contract (std::atomic's calls by
# their order argument) and a mutant of its release.
ANCHORED_CONTRACT = """
[target.contract]
release.sys = 'store(?=\\s*\\([^;]*memory_order_release)'
acquire.sys = 'load(?=\\s*\\([^;]*memory_order_acquire)'
store = 'store(?=\\s*\\([^;]*memory_order_relaxed)'

[[target.mutation]]
family = "weaken-release"
kind = "release"
pattern = 'std::memory_order_release'
replacement = 'std::memory_order_relaxed'
"""


def test_an_anchored_sites_mutant_maps_to_its_rewrite(tmp_path):
    """The mutant's text is the annotated tree's (its `// @end` line in it):
    the region is read there, so the weakened release maps to a relaxed one."""
    fixture = REPO / "tests/fixtures/flag_payload_anchored/catalog.toml"
    path = tmp_path / "catalog.toml"
    path.write_text(fixture.read_text() + ANCHORED_CONTRACT)
    catalog = with_generated(load_catalog(path, tree_root=REPO), REPO)
    mapped = [(m.fault_id, m.site, m.shape.publish) for m in amplified(catalog, REPO)]
    assert mapped == [
        ("gen.weaken-release.fx.producer.flag_release", "fx.producer.flag_release",
         Publish.RELAXED_SYS)
    ]
