"""The device scripts (scripts/gpu/*.sh, scripts/four_gpus.sh) name only
options and subcommands their tools have: a stale one costs a device call
that fails in seconds (docs/tools.md, "Device scripts"). And they
refuse bad input in one line, exit 2, before any work (no wheel installed,
no kernel built)."""

import glob
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = sorted((REPO / "scripts" / "gpu").glob("*.sh")) + [REPO / "scripts" / "four_gpus.sh"]
NOT_TOOLS = {"pytest", "pip"}  # their options are their own
OTHER_COMMANDS = re.compile(r"python3 -m (pytest|pip)|\bgit\b|\$NCU\b")  # their options are their own
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def code_lines(script: Path) -> list[str]:
    """The script's lines without comments, continuation lines joined."""
    text = script.read_text().replace("\\\n", " ")
    return [line.split(" #")[0] for line in text.splitlines() if not line.lstrip().startswith("#")]


def loop_words(lines: list[str], name: str) -> list[str]:
    """The words NAME takes: `for NAME in WORDS;`, or a case's `A | B) NAME=$1`."""
    for line in lines:
        if found := re.search(rf"for {name} in ([^;]+);", line):
            return found[1].split()
        if found := re.search(rf"([\w |]+)\)\s*{name}=\$1", line):
            return found[1].replace("|", " ").split()
    raise AssertionError(f"no loop or case gives ${name}")


def invocations(script: Path) -> list[tuple[str, list[str]]]:
    """Each `python3 -m MODULE ARGS` or `python3 SCRIPT.py ARGS` the script
    runs: (module or script, its words)."""
    lines = code_lines(script)
    calls = []
    for line in lines:
        for found in re.finditer(r"python3 (?:-m (?=\S)|(?=\S+\.py\b))(\S+)(.*)", line):
            module, rest = found[1], shlex.split(found[2].split(">")[0], posix=True)
            if loop := re.search(r"\$\{?(\w+)\}?", module):
                calls += [(module.replace(loop[0], w), rest) for w in loop_words(lines, loop[1])]
            else:
                calls.append((module, rest))
    return [(m, words) for m, words in calls if m not in NOT_TOOLS]


@cache
def help_text(*command: str) -> str:
    run = [sys.executable, *command] if command[0].endswith(".py") else [sys.executable, "-m", *command]
    done = subprocess.run([*run, "--help"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(command)} --help: {done.stderr.strip()}"
    return done.stdout


def subcommands(module: str) -> set[str]:
    """The choices of the module's first positional argument, if it has subcommands."""
    found = re.search(r"positional arguments:\n  \{([\w,-]+)\}", help_text(module))
    return set(found[1].split(",")) if found else set()


def accepted(script: Path) -> str:
    """Every help text of the tools (and their subcommands) the script runs."""
    texts = []
    for module, words in invocations(script):
        texts.append(help_text(module))
        texts += [help_text(module, w) for w in words if w in subcommands(module)]
    return "\n".join(texts)


def unknown_flags(script: Path, helps: str) -> list[str]:
    """The script's --options (but pip's, pytest's, git's and ncu's) no help
    text names; a line that runs a tool is read from the tool on (what a
    wrapper such as timeout or ncu takes before it is not the tool's)."""
    lines = [
        line[tool.start() :] if (tool := re.search(r"python3 (-m |\S+\.py)", line)) else line
        for line in code_lines(script)
    ]
    lines = [line for line in lines if not OTHER_COMMANDS.search(line)]
    flags = {f for line in lines for f in FLAG.findall(line)}
    return sorted(f for f in flags if not re.search(rf"(?<![\w-]){f}(?![\w-])", helps))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s.name)
def test_every_option_a_device_script_passes_is_one_its_tools_take(script):
    if not invocations(script):
        pytest.skip(f"{script.name} runs no python tool")
    helps = accepted(script)
    assert unknown_flags(script, helps) == [], script.name


def test_the_scripts_tools_are_all_found():
    modules = {m for s in SCRIPTS for m, _ in invocations(s)}
    assert modules == {
        "tools.bench",
        "tools.bench.combine",
        "tools.bench.dispatch",
        "tools.bench.expand",
        "tools.bench.screen",
        "tools.build",
        "tools.sanitize",
        "tools.driver",
        "tools.validate",
        "faults",
        "scripts/gpu/run_cost.py",
        "scripts/gpu/count_wait_probe.py",
    }


def test_the_faults_subcommands_the_scripts_run_exist():
    run = {w for s in SCRIPTS for m, words in invocations(s) if m == "faults" for w in words}
    named = run & {"sweep", "review", "corpus", "replay", "amplify", "shrink", "compare"}
    assert named <= subcommands("faults")
    assert {"sweep", "corpus", "replay", "amplify"} <= named  # the scripts' own, found


def test_an_unknown_option_is_found(tmp_path):
    script = tmp_path / "stale.sh"
    script.write_text(
        'timeout 9 python3 -m tools.validate --rank-mode logical \\\n  --no-such-knob "$X"\n'
    )
    assert unknown_flags(script, accepted(script)) == ["--no-such-knob"]


def refusal(script: str, *words: str, **env: str) -> tuple[int, str]:
    """A device script run here (no GPU) with `env`: its exit and its output."""
    done = subprocess.run(
        ["bash", f"scripts/gpu/{script}", *words],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "OUT": "/nonexistent/out", **env},
        timeout=30,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("script", "words", "env", "said"),
    [
        (
            "profile.sh",
            ["nope"],
            {},
            "profile.sh: BENCH is combine, dispatch or expand, got 'nope'",
        ),
        ("profile.sh", [], {}, "profile.sh: BENCH is combine, dispatch or expand, got ''"),
        (
            "profile.sh",
            ["expand"],
            {"KERNEL": "ffn_combine"},
            "profile.sh: KERNEL=ffn_combine is not a kernel of the expand bench (ffn_expand)",
        ),
        (
            "kernels.sh",
            [],
            {"PRIOR": "docs/results/bench-2xH200.json"},
            "PRIOR=docs/results/bench-2xH200.json: validate reads only a validate-*.json "
            "of its own name",
        ),
        (
            "kernels.sh",
            [],
            {"PRIOR": "no/validate-x.json"},
            "PRIOR=no/validate-x.json: no such file",
        ),
        (
            "kernels.sh",
            [],
            {"BASE_TREE": "no/tree"},
            "no base tree at no/tree (see the header; BASE_TREE=none, or BENCH_S=0 for no bench)",
        ),
        (
            "kernels.sh",
            [],
            {"BASE_TREE": "afdep/csrc", "VARIANTS": "afdep/csrc no/variant"},
            "VARIANTS: no kernel tree at no/variant (no impls/ folder)",
        ),
        ("sweep.sh", [], {}, "sweep.sh: REGEX [CONFIG...], or REST_OF=REPORT"),
        (
            "validate.sh",
            [],
            {},
            "validate.sh: GROUP... (correctness failures count-first four-gpu split-knobs)",
        ),
        ("corpus.sh", [], {}, "corpus.sh: REGEX... (whole bug names, e.g. 'b15.*')"),
        ("corpus.sh", ["b15.*", "b99"], {}, "corpus.sh: REGEX 'b99' names no bug of corpus/afdep"),
        ("target_corpus.sh", [], {}, "target_corpus.sh: CORPUS [REGEX]"),
        ("target_corpus.sh", ["no.toml"], {}, "target_corpus.sh: no corpus file no.toml"),
        (
            "target_corpus.sh",
            ["corpus/flashinfer_comm.toml", "Z.*"],
            {},
            "target_corpus.sh: REGEX 'Z.*' names no bug of corpus/flashinfer_comm.toml",
        ),
        (
            "sweep.sh",
            ["P1"],
            {"REST_OF": "r.json"},
            "sweep.sh: REST_OF=r.json chooses faults and configs; no REGEX or CONFIG",
        ),
    ],
)
def test_a_device_script_refuses_bad_input_in_one_line_before_any_work(script, words, env, said):
    code, output = refusal(script, *words, **env)
    assert (code, output) == (2, said + "\n")


def test_profile_on_a_machine_without_ncu_says_so_before_any_work():
    places = ["/usr/local/cuda*/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu"]
    if any(glob.glob(place) for place in places):
        pytest.skip("this machine has ncu")
    code, output = refusal("profile.sh", "dispatch", "--tokens", "2048")
    assert (code, output) == (
        3,
        "profile.sh: no ncu here (PATH, /usr/local/cuda*/bin, /opt/nvidia/nsight-compute)\n",
    )


def probe(*words: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "scripts/gpu/count_wait_probe.py", *words],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr


def test_the_count_wait_probe_instruments_a_mutant_tree_once_and_refuses_bad_trees(tmp_path):
    tree = tmp_path / "tree"
    from tools.faults_cli.main import main as faults

    fault = "gen.epoch-off-by-one.cf.ffn_place.count_wait"
    assert faults(["--root", str(REPO), "apply", fault, "--out", str(tree)]) == 0
    impls = tree / "afdep/csrc/impls"
    assert probe(str(tree))[0] == 0
    probed = {
        name: (impls / name).read_text() for name in ("ffn_place.cuh", "attention_dispatch.cuh")
    }
    assert [text.count("CWPROBE") for text in probed.values()] == [2, 2]
    assert probe(str(tree)) == (
        2,
        f"count_wait_probe.py: error: {impls / 'ffn_place.cuh'}: probed already\n",
    )
    assert {name: (impls / name).read_text() for name in probed} == probed  # nothing rewritten
    assert probe(str(tmp_path / "none")) == (
        2,
        f"count_wait_probe.py: error: tree {tmp_path / 'none'}: "
        "no afdep/csrc/impls/ffn_place.cuh\n",
    )
    assert probe()[0] == 2
