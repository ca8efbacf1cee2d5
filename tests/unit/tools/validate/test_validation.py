from __future__ import annotations

import json
from pathlib import Path

import pytest

import hostio
import tools.validate.validation
from afdep.vocab import RouteKind
from tools.validate.matrix import ROUTE_DEADLINE_S, Expect, Group
from tools.validate.validation import Run, judge, main, matrix_2gpu, results_document

DIGEST = "b" * 64


def record(**changes):
    base = {
        "outer_timeout": False,
        "wall_s": 10.0,
        "digests": [DIGEST],
        "exit_code": 0,
        "mismatches": 0,
        "timeouts": [],
        "assertions": 0,
        "route_asserts": [],
        "result": {"ok": True, "checks": 10},
    }
    return {**base, **changes}


PASS = Run("p", [], Expect.PASS, Group.CORRECTNESS)
ROUTE = Run("r", [], Expect.ROUTE, Group.FAILURES, route=RouteKind.WIDE)
TIMEOUT = Run("t", [], Expect.TIMEOUT, Group.FAILURES)


def test_clean_pass_is_ok():
    assert judge(PASS, record(), DIGEST) == []


@pytest.mark.parametrize(
    "changes, problem",
    [
        ({"exit_code": 1}, "exit 1"),
        ({"mismatches": 2}, "mismatch, timeout or assertion lines"),
        ({"result": {"ok": True, "checks": 0}}, "AFDEP_RESULT not ok or no checks"),
        ({"digests": ["c" * 64]}, "is not the tree's bbbbbbbb"),
        ({"outer_timeout": True}, "hung: killed by the outer timeout"),
    ],
)
def test_pass_problems(changes, problem):
    assert any(problem in p for p in judge(PASS, record(**changes), DIGEST))


def test_route_needs_a_line_from_every_rank_in_time():
    both = [("wide", 0, 0, 0), ("wide", 0, 0, 1)]
    assert judge(ROUTE, record(exit_code=1, route_asserts=both), DIGEST) == []
    one = judge(ROUTE, record(exit_code=1, route_asserts=both[:1]), DIGEST)
    assert one == ["no `afdep assertion failed: route wide` line from ranks [1]"]
    late = judge(
        ROUTE, record(exit_code=1, route_asserts=both, wall_s=ROUTE_DEADLINE_S + 1), DIGEST
    )
    assert late and "took" in late[0]
    assert "exit 0: the failure was not detected" in judge(ROUTE, record(), DIGEST)


def test_timeout_needs_a_site_line():
    assert (
        judge(TIMEOUT, record(exit_code=1, timeouts=[("cb.attention_combine.row_wait", 0)]), DIGEST)
        == []
    )
    assert judge(TIMEOUT, record(exit_code=1), DIGEST) == ["no `afdep timeout: site=` line"]


def test_matrix_covers_the_acceptance():
    runs = {run.name: run for run in matrix_2gpu()}
    for payload in ("bf16", "fp8"):
        for execution in ("eager", "graph"):
            for hidden in (2048, 7168):
                for sms in (7, 24):
                    run = runs[f"{payload}-{execution}-h{hidden}-sms{sms}"]
                    assert "1 8 128 512 2048" in " ".join(run.args)
                assert f"view-{payload}-{execution}-h{hidden}" in runs
    for execution in ("eager", "graph"):
        for kind in ("negative", "wide", "duplicate", "dummy"):
            run = runs[f"invalid-{execution}-{kind}"]
            assert (run.expect, run.route, run.expectation) == (
                Expect.ROUTE,
                RouteKind(kind),
                f"route:{kind}",
            )
    assert runs["skip-dispatch-attention"].expect == Expect.TIMEOUT


def test_cpu_machine_compiles_checks_reference_and_lists_gpu_runs(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("AFDEP_JIT_CACHE", str(tmp_path / "jit"))
    monkeypatch.setattr(tools.validate.validation, "gpu_count", lambda: 0)
    monkeypatch.setattr(hostio.machine, "gpu_count", lambda: 0)
    assert main(["--only", "^invalid-eager"]) == 0
    out = capsys.readouterr().out
    assert "reference 2A:2F E=16 bf16: ok" in out
    assert "4 runs need 2 GPUs" in out and "invalid-eager-dummy" in out


def test_agreement_run_judged_from_its_log(tmp_path):
    """The whole path a validate run takes: log -> facts -> record -> verdict."""
    from afdep.vocab import parse_log
    from hostio import ProcessOutcome
    from tools.driver.launch import outcome_record

    line = (
        "all ranks must use the same count-first configuration: "
        "AFDEP_COUNT_FIRST_UNGATE differs (rank 0: False, rank 1: True)"
    )
    log = (
        f'[default0]:"native_source_sha256": "{DIGEST}"\n'
        f"[default1]:afdep.config.ConfigError: {line}\n"
        f"[default0]:afdep.config.ConfigError: {line}\n"
    )
    process = ProcessOutcome([], 1, 5.0, False, str(tmp_path / "x.log"), "0" * 64)
    record = outcome_record(process, parse_log(log))
    run = Run("d", [], Expect.AGREEMENT, Group.COUNT_FIRST)
    assert judge(run, record, DIGEST) == []
    one_rank = outcome_record(process, parse_log(log.rsplit("[default0]:afdep", 1)[0]))
    assert judge(run, one_rank, DIGEST) == ["no agreement error from ranks [0]"]


def test_a_document_missing_planned_runs_is_not_ok():
    records = {"a": {"ok": True}, "b": {"ok": True}}
    partial = results_document("2xH200", DIGEST, records, 4, planned=["a", "b", "c"])
    assert (partial["ok"], partial["missing"], partial["counts"]) == (
        False,
        ["c"],
        {"runs": 2, "ok": 2, "planned": 3},
    )
    whole = results_document("2xH200", DIGEST, records, 4, planned=["a", "b"])
    assert (whole["ok"], whole["missing"]) == (True, [])
    failed = results_document("2xH200", DIGEST, {**records, "c": {"ok": False}}, 4, ["a", "b", "c"])
    assert failed["ok"] is False and failed["missing"] == []


ONE_RUN = "bf16-eager-h2048-sms24"
NVLINK_2 = "(2xH200, 2 NVLink ranks)"


@pytest.fixture
def two_gpus(monkeypatch, tmp_path):
    """validate on a machine it takes for 2 GPUs: every driver run is a fake
    that logs this tree's digest and a result, and exits with `exit_codes`'s
    code for its run (0 unless named). Temporary folders go under tmp/."""
    import tempfile

    from afdep.jit import source_digest
    from afdep.vocab import digest_line, result_line
    from hostio import ProcessOutcome

    digest, exit_codes = source_digest(), {}

    def fake_run(command, log_path, *, timeout_s, env=None):
        name = Path(log_path).stem
        code = exit_codes.get(name, 0)
        if code == "interrupt":
            raise KeyboardInterrupt
        result = result_line({"ok": code == 0, "checks": 4})
        Path(log_path).write_text(f"{digest_line(digest)}\n{result}\n")
        return ProcessOutcome(command, code, 0.1, False, str(log_path), "0" * 64)

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(tools.validate.validation, "run_logged", fake_run)
    monkeypatch.setattr(tools.validate.validation, "gpu_count", lambda: 2)
    monkeypatch.setattr(tools.validate.validation, "machine_name", lambda: "2xH200")
    return exit_codes


def validate(tmp_path, *words: str) -> int:
    return main(["--only", f"^{ONE_RUN}$", "--results-dir", str(tmp_path / "results"), *words])


def temporary_folders(tmp_path) -> list[Path]:
    return sorted((tmp_path / "tmp").iterdir())


def test_temporary_logs_are_removed_when_every_run_met_its_expectation(two_gpus, tmp_path, capsys):
    assert validate(tmp_path) == 0
    assert temporary_folders(tmp_path) == []
    out = capsys.readouterr().out
    assert "logs kept" not in out
    document = json.loads((tmp_path / "results" / "validate-2xH200.json").read_text())
    assert (list(document["runs"]), document["runs"][ONE_RUN]["ok"]) == ([ONE_RUN], True)
    assert out.splitlines()[-1].startswith(
        f"wrote {tmp_path / 'results' / 'validate-2xH200.json'} {NVLINK_2}: 1/1 runs ok; "
    )


def test_temporary_logs_are_kept_and_named_when_a_run_missed(two_gpus, tmp_path, capsys):
    two_gpus[ONE_RUN] = 1
    assert validate(tmp_path) == 1
    [kept] = temporary_folders(tmp_path)
    assert kept.name.startswith("afdep-validate-")
    assert sorted(path.name for path in kept.iterdir()) == [f"{ONE_RUN}.log"]
    assert capsys.readouterr().out.splitlines()[-1] == f"logs kept (a run failed): {kept}"


def test_keep_keeps_the_temporary_logs_of_a_success(two_gpus, tmp_path, capsys):
    assert validate(tmp_path, "--keep") == 0
    [kept] = temporary_folders(tmp_path)
    assert (kept / f"{ONE_RUN}.log").exists()
    assert capsys.readouterr().out.splitlines()[-1] == f"logs kept (--keep): {kept}"


def test_an_explicit_logs_dir_is_kept(two_gpus, tmp_path, capsys):
    assert validate(tmp_path, "--logs-dir", str(tmp_path / "logs")) == 0
    assert temporary_folders(tmp_path) == []
    assert (tmp_path / "logs" / f"{ONE_RUN}.log").exists()
    out = capsys.readouterr().out  # the user named it: said at the start, not again
    assert f"logs {tmp_path / 'logs'}" in out.splitlines()[0] and "logs kept" not in out


def test_an_interrupted_validation_keeps_its_logs_and_reraises(two_gpus, tmp_path, capsys):
    two_gpus[ONE_RUN] = "interrupt"
    with pytest.raises(KeyboardInterrupt):  # entry_point, around main, says the one line
        main.__wrapped__(["--only", f"^{ONE_RUN}$", "--results-dir", str(tmp_path / "results")])
    [kept] = temporary_folders(tmp_path)
    assert capsys.readouterr().out.splitlines()[-1] == f"logs kept (interrupted): {kept}"


def test_runs_of_the_same_tree_accumulate_across_invocations(two_gpus, tmp_path, capsys):
    other = "bf16-graph-h2048-sms24"
    assert validate(tmp_path) == 0
    assert main(["--only", f"^{other}$", "--results-dir", str(tmp_path / "results")]) == 0
    document = json.loads((tmp_path / "results" / "validate-2xH200.json").read_text())
    assert sorted(document["runs"]) == [ONE_RUN, other]
    assert document["counts"]["runs"] == 2 and document["counts"]["ok"] == 2
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .startswith(
            f"wrote {tmp_path / 'results' / 'validate-2xH200.json'} {NVLINK_2}: 2/2 runs ok; "
        )
    )


def test_resume_runs_only_what_the_document_of_this_tree_lacks(two_gpus, tmp_path, capsys):
    other = "bf16-graph-h2048-sms24"
    path = tmp_path / "results" / "validate-2xH200.json"
    both = ["--only", f"^({ONE_RUN}|{other})$", "--results-dir", str(tmp_path / "results")]
    assert validate(tmp_path) == 0
    capsys.readouterr()
    two_gpus[ONE_RUN] = "interrupt"  # run again, it would raise
    assert main([*both, "--resume"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "--resume: 1 recorded already, 1 to run (of the 2 selected)"
    assert out[-1].startswith(f"wrote {path} {NVLINK_2}: 2/2 runs ok; ")
    assert sorted(json.loads(path.read_text())["runs"]) == [ONE_RUN, other]
    written = path.read_text()
    two_gpus[other] = "interrupt"
    assert main([*both, "--resume"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "--resume: 2 recorded already, 0 to run (of the 2 selected)"
    assert out[-1].startswith(f"--resume: nothing left to run; {path} {NVLINK_2}: 2/2 runs ok; ")
    assert path.read_text() == written


def test_resume_fails_on_a_recorded_failure_it_does_not_run_again(two_gpus, tmp_path, capsys):
    two_gpus[ONE_RUN] = 1
    assert validate(tmp_path) == 1
    two_gpus[ONE_RUN] = "interrupt"
    assert validate(tmp_path, "--resume") == 1
    out = capsys.readouterr().out.splitlines()
    assert "--resume: 1 recorded already, 0 to run (of the 1 selected)" in out


def test_a_document_that_does_not_parse_is_refused_before_any_run(two_gpus, tmp_path, capsys):
    path = tmp_path / "results" / "validate-2xH200.json"
    path.parent.mkdir()
    path.write_text("{")
    two_gpus[ONE_RUN] = "interrupt"  # a run would raise
    assert validate(tmp_path) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"afdep validate: error: {path}: not a validate document (Expecting property name "
        "enclosed in double quotes: line 1 column 2 (char 1)); move it away\n"
    )
