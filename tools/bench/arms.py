"""Screens: arms (environment sets, each optionally on its own kernel source
tree) interleaved across processes, the arm order rotated from one process to
the next, against two references measured in the same processes (NCCL
all_to_all_single, a plain peer copy).

    python -m tools.bench [--arm NAME:VAR=VAL,...[,tree=DIR]] [--iso] [--processes 3]
                          [--buckets ...]

Per bucket: each arm's median µs, paired change % against the control arm in
each process, their geometric mean, and how many processes saw the arm faster.
Writes `bench-<machine>.json` and prints the table and the ratios of the performance targets
(reported, not gated). The processes' logs go to a temporary folder, removed
once every process succeeded and otherwise kept (`logs kept (why): PATH`); --keep
keeps it, and a --logs-dir is always kept.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path

from afdep.config import COUNT_FIRST_EVERY_BUCKET as CF
from afdep.config import environment_error
from afdep.jit import CSRC
from afdep.vocab import BENCH, Arm
from hostio import (
    RESULTS_DIR,
    KeptFolder,
    OneLineParser,
    ProcessOutcome,
    UsageError,
    at_least,
    at_least_one,
    entry_point,
    gpu_count,
    machine_name,
    results_stem,
    run_logged,
    write_json,
)
from tools.bench.micro import host_interface_differs
from tools.bench.overlap import overlap_rows
from tools.bench.report import write_report
from tools.bench.summary import CONTROL, print_table, summarize, targets
from tools.driver.launch import folder, torchrun_command

BUCKETS = (1, 8, 32, 128, 512, 1024, 2048)
DEFAULT_ARMS = {
    CONTROL: {"AFDEP_PAYLOAD_FIRST": "1"},
    "CF": CF,
    "CF_ungate": {**CF, "AFDEP_COUNT_FIRST_UNGATE": "1"},
    "CF_attn": {**CF, "AFDEP_COUNT_FIRST_ARM": Arm.ATTENTION.value},
}


TREE = "tree"  # an arm's kernel sources (a folder like afdep/csrc), beside its variables


def parse_arm(text: str) -> tuple[str, dict[str, str]]:
    """`NAME:AFDEP_VAR=VALUE,...,tree=DIR`: the arm's variables and, optionally,
    the kernel sources it builds (a source-tree arm)."""
    name, _, assignments = text.partition(":")
    variables = {}
    for item in filter(None, assignments.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not (key.startswith("AFDEP_") or key == TREE) or not value and key == TREE:
            raise argparse.ArgumentTypeError(
                f"--arm {text!r}: expected NAME:AFDEP_VAR=VALUE,...[,tree=DIR]"
            )
        variables[key] = value
    if not name:
        raise argparse.ArgumentTypeError(f"--arm {text!r}: the arm needs a name")
    return name, variables


ISO = "ISO"


def iso_arm(control: dict[str, str], where: Path) -> dict[str, str]:
    """The control arm on a second copy of its kernel sources (its tree, else
    this package's): the same code loaded as modules of its own, so its change
    against C is the noise. A copy left in `where` by an earlier run goes first."""
    shutil.rmtree(where, ignore_errors=True)
    shutil.copytree(Path(control.get(TREE, CSRC)), where)
    return {**control, TREE: str(where)}


RESULT_KEYS = ("nccl", "nccl_pipeline", "peer_copy", "overlap")  # not arm names


def tree_problem(name: str, tree: str) -> str | None:
    """Why a tree arm cannot run on this package's host side, if it cannot."""
    if not (Path(tree) / "impls").is_dir():
        return f"--arm {name}: tree {tree} holds no kernel sources (no impls/ folder)"
    interface = host_interface_differs(Path(tree))
    if interface is not None:
        return (
            f"--arm {name}: tree {tree}: {interface} differs from this package's "
            "(its host side reads that layout)"
        )
    return None


def rotated(names: list[str], shift: int) -> list[str]:
    shift %= len(names)
    return names[shift:] + names[:shift]


def refusal(arms: dict[str, dict[str, str]], nproc: int) -> str | None:
    """Why the screen cannot start, checked before any process does: the
    environment, each arm's variables on top of it, the GPUs."""
    problem = environment_error()
    if problem is not None:
        return problem
    for name, variables in arms.items():
        problem = tree_problem(name, variables[TREE]) if TREE in variables else None
        if problem is not None:
            return problem
        env = {k: v for k, v in variables.items() if k != TREE}
        problem = environment_error({**os.environ, **env})
        if problem is not None:
            return f"--arm {name}: {problem}"
    found = gpu_count()
    if found < nproc:
        return f"--nproc {nproc}: needs {nproc} GPUs and found {found}"
    return None


def argument_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="afdep bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--arm",
        type=parse_arm,
        action="append",
        default=None,
        help="replaces the default arms (C, CF, CF_ungate, CF_attn)",
    )
    parser.add_argument(
        "--iso",
        action="store_true",
        help="add arm ISO: the control's variables on a second copy of the kernel sources "
        "(the A/A noise floor)",
    )
    parser.add_argument("--processes", type=at_least_one, default=3)
    parser.add_argument("--buckets", type=at_least_one, nargs="+", default=list(BUCKETS))
    parser.add_argument("--iters", type=at_least_one, default=50)
    parser.add_argument("--nproc", type=at_least_two, default=2)
    parser.add_argument(
        "--trace-buckets",
        type=at_least_one,
        nargs="*",
        default=None,
        help="per-kernel traces at these buckets (first process only; default: 512 2048)",
    )
    parser.add_argument(
        "--overlap-buckets",
        type=at_least_one,
        nargs="*",
        default=None,
        help="the overlap screen at these: GEMMs alone and beside the exchange "
        "(default: 1024 2048)",
    )
    parser.add_argument("--results-dir", type=folder, default=RESULTS_DIR)
    parser.add_argument(
        "--tag",
        type=file_tag,
        default="",
        help="names the JSON bench-<machine>-<tag>.json (e.g. a split)",
    )
    parser.add_argument(
        "--logs-dir", type=folder, default=None, help="kept (default: a temporary folder)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary logs folder")
    parser.add_argument("worker_args", nargs="*", help="passed to the worker after --")
    return parser


at_least_two = at_least(2)  # --nproc: an attention rank and an FFN rank at least


def file_tag(text: str) -> str:
    """argparse type for --tag: a part of a file name (e.g. a split)."""
    if not re.fullmatch(r"[\w.-]*", text):
        raise argparse.ArgumentTypeError(f"{text!r}: letters, digits, '.', '-' or '_' only")
    return text


DEFAULT_BUCKETS_OF = {"trace_buckets": (512, 2048), "overlap_buckets": (1024, 2048)}


def planned_buckets(args: argparse.Namespace) -> None:
    """--trace-buckets and --overlap-buckets: named ones must be among
    --buckets; by default, those of 512/2048 and 1024/2048 that are."""
    for option, default in DEFAULT_BUCKETS_OF.items():
        named = getattr(args, option)
        if named is None:
            setattr(args, option, [b for b in default if b in args.buckets])
            continue
        stray = sorted(set(named) - set(args.buckets))
        if stray:
            flag = "--" + option.replace("_", "-")
            raise UsageError(f"{flag} {stray[0]}: not one of --buckets {args.buckets}")


def planned_arms(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """The arms in their order, refused (UsageError) when one is named twice,
    the control is missing, or the environment or the GPUs cannot run them."""
    arms = dict(DEFAULT_ARMS)
    if args.arm:
        names = [name for name, _ in args.arm]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise UsageError(f"--arm {twice[0]} is given twice")
        if CONTROL not in names:
            raise UsageError(f"the control arm {CONTROL} is required (--arm {CONTROL}:...)")
        arms = dict(args.arm)
    if args.iso and ISO in arms:
        raise UsageError(f"--iso: an arm is already named {ISO}")
    taken = sorted(set(arms) & set(RESULT_KEYS))
    if taken:
        raise UsageError(f"--arm {taken[0]}: the name of a reference's results; pick another")

    problem = refusal(arms, args.nproc)
    if problem is not None:
        raise UsageError(problem)
    return arms


def bucket_words(option: str, buckets: list[int]) -> list[str]:
    return [option, *map(str, buckets)] if buckets else []


def run_processes(
    args: argparse.Namespace, arms: dict[str, dict[str, str]], logs: Path
) -> list[dict] | None:
    """Every bench process, one after the other, the arm order rotated from
    one to the next; None once one fails (its log's tail is said)."""
    processes = []
    for index in range(args.processes):
        order = rotated(list(arms), index)
        worker_args = [
            "--arms",
            json.dumps(arms),
            "--order",
            *order,
            "--buckets",
            *map(str, args.buckets),
            "--iters",
            str(args.iters),
            *(bucket_words("--trace-buckets", args.trace_buckets) if index == 0 else []),
            *(
                ["--overlap-buckets", *map(str, args.overlap_buckets)]
                if args.overlap_buckets
                else []
            ),
            *args.worker_args,
        ]
        command = torchrun_command(args.nproc, "tools.bench.worker", worker_args, tee=False)
        outcome = run_logged(command, logs / f"bench-{index}.log", timeout_s=900)
        result = process_result(index, outcome)
        if result is None:
            return None
        processes.append(result)
        print(f"process {index}: order {' '.join(order)} done", flush=True)
    return processes


def process_result(index: int, outcome: ProcessOutcome) -> dict | None:
    """The process's last `AFDEP_BENCH {json}` line; None, said with the
    log's tail, when it exited non-zero or printed no such line or a broken one."""
    text = Path(outcome.log_path).read_text(errors="replace")
    lines = [line for line in text.splitlines() if f"{BENCH} " in line]
    if outcome.exit_code != 0:
        why = f"exit {outcome.exit_code}"
    elif not lines:
        why = f"exit 0 without an {BENCH} line"
    else:
        try:
            return json.loads(lines[-1].split(f"{BENCH} ", 1)[1])
        except ValueError as error:
            why = f"its {BENCH} line is not JSON: {error}"
    print(
        f"bench process {index} failed ({why}); log {outcome.log_path}:\n{text[-3000:]}",
        file=sys.stderr,
    )
    return None


def results_document(
    args: argparse.Namespace, arms: dict[str, dict[str, str]], processes: list[dict]
) -> dict:
    """The screen's document: the arms, the table over the processes, the
    performance targets' ratios, the first process's traces, every process."""
    rows = summarize(processes, list(arms), args.buckets)
    return {
        "tool": "tools.bench",
        "machine": machine_name(),
        "arms": arms,
        "control": CONTROL,
        "native_source_sha256": processes[0]["native_source_sha256"],
        "buckets": args.buckets,
        "worker_args": args.worker_args,
        "table": rows,
        "targets": targets(rows, list(arms), processes[0]["row_bytes"]),
        "traces": processes[0].get("traces", {}),
        "overlap": overlap_rows(processes, list(arms)),
        "processes": processes,
    }


def write(args: argparse.Namespace, document: dict) -> None:
    """The table, the traces and the targets' ratios said; the document written."""
    print_table(document["table"], list(document["arms"]))
    for lines in document["traces"].values():
        print("\n".join(lines))
    for key, value in document["targets"].items():
        print(f"{key} = {value}")
    tag = f"-{args.tag}" if args.tag else ""
    path = args.results_dir / f"{results_stem('bench', document['machine'])}{tag}.json"
    write_json(path, document)
    print(f"wrote {path} and {write_report(document, path)}")


@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = argument_parser()
    args = parser.parse_args(argv)
    try:
        planned_buckets(args)
        arms = planned_arms(args)
    except UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    with KeptFolder(args.logs_dir, "afdep-bench-", "logs", keep=args.keep) as logs:
        if args.iso:
            arms[ISO] = iso_arm(arms[CONTROL], logs.path / "iso-csrc")
        processes = run_processes(args, arms, logs.path)
        if processes is not None:
            write(args, results_document(args, arms, processes))
        logs.failed = processes is None
    return 0 if processes is not None else 1


if __name__ == "__main__":
    sys.exit(main())
