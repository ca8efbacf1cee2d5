"""What the fault engine's runs cost on this GPU machine, on both of its paths
in one call: a process started per run (hostio.run_logged) and the target's
warm workers ([target.serve], faults/pipeline/serve.py). The clean tree's runs
of the catalog's configs that fit one GPU (logical ranks), `slots` at a time
from one queue as the engine takes them, each path at each slot count.

    python3 scripts/gpu/run_cost.py --out DIR [--results-dir docs/results]
        [--configs NAME...] [--process-slots N...] [--worker-slots N...]
        [--runs-per-slot N] [--worker-runs-per-slot N] [--variant NAME=VALUE...]
        [--profile]

Per batch: runs a second, the GPU busy (nvidia-smi, every 0.5 s), CPU seconds
a run (all CPUs' busy time over the batch, /proc/stat, per run), the median
run wall, the driver's own wall (its AFDEP_RESULT line) and the overhead
beyond it. Writes DIR/run-cost.json, the document
`<results-dir>/engine-cost-<machine>-logical.{json,md}`, DIR/logs/ and
DIR/profiles/ (a cProfile of one process-per-run run of each config)."""

from __future__ import annotations

import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from afdep.jit import source_digest  # noqa: E402
from afdep.vocab import parse_log  # noqa: E402
from faults.catalog import CatalogError, load_catalog  # noqa: E402
from faults.pipeline.run import run_config, worker_pool  # noqa: E402
from hostio import (  # noqa: E402
    OneLineParser,
    RankMode,
    at_least,
    cpu_share,
    machine_name,
    results_stem,
    write_json,
    write_text,
)

def cpu_jiffies() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def gpu_card() -> dict:
    """The card that ran, and its bounds as nvidia-smi states them."""
    query = "name,memory.total,clocks.max.sm,clocks.max.memory,power.limit"
    try:
        said = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        ).stdout.strip().splitlines()  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return dict(zip(query.split(","), (v.strip() for v in said[0].split(",")), strict=False))


class Sampler:
    """The GPU's busy fraction every 0.5 s, and the CPUs' busy seconds, while it runs."""

    def __init__(self):
        self.gpu: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.cpu_s = 0.0
        self.cpu_busy = 0.0

    def loop(self) -> None:
        while not self.stop.wait(0.5):
            try:
                said = subprocess.run(
                    ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                    capture_output=True, text=True, timeout=10,
                ).stdout.split()  # fmt: skip
            except (OSError, subprocess.TimeoutExpired):  # no nvidia-smi here
                said = []
            if said:
                self.gpu.append(float(said[0]) / 100)

    def __enter__(self) -> Sampler:
        self.before = cpu_jiffies()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        after = cpu_jiffies()
        busy, total = after[0] - self.before[0], after[1] - self.before[1]
        self.cpu_s = busy / os.sysconf("SC_CLK_TCK")
        self.cpu_busy = busy / max(total, 1.0)


def one_run(catalog, config, logs: Path, name: str, workers=None, env=None) -> dict:
    """One clean run of `config` as the engine makes it (`env` over the config's)."""
    started = time.perf_counter()
    outcome = run_config(
        catalog.target, config, REPO, logs, "", name,
        gpus=1, ranks=catalog.ranks_for(config), env=env, workers=workers,
    )  # fmt: skip
    wall = time.perf_counter() - started
    results = parse_log((logs / f"{name}.log").read_text(errors="replace")).results
    driver = results[-1] if results else {}
    return {
        "config": config.name,
        "exit": outcome.exit_code,
        "wall_s": round(wall, 3),
        "driver_wall_s": driver.get("wall_s"),
        "phases_s": driver.get("phases_s", {}),
        "ok": bool(driver.get("ok")) and outcome.exit_code == 0,
    }


def batch(catalog, configs, logs: Path, path: str, slots: int, runs: int, workers, env) -> dict:
    """`runs` clean runs over `configs` in turn, `slots` at a time from one queue."""
    jobs: queue.SimpleQueue = queue.SimpleQueue()
    for i in range(runs):
        jobs.put((i, configs[i % len(configs)]))
    done: list[dict] = []
    lock = threading.Lock()

    def work() -> None:
        while True:
            try:
                i, config = jobs.get_nowait()
            except queue.Empty:
                return
            name = f"{path}-s{slots}-{i}-{config.name}"
            row = one_run(catalog, config, logs, name, workers, env)
            with lock:
                done.append(row)

    with Sampler() as sampler:
        started = time.perf_counter()
        threads = [threading.Thread(target=work) for _ in range(slots)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
    walls = [r["wall_s"] for r in done]
    driver = [r["driver_wall_s"] for r in done if r["driver_wall_s"] is not None]
    overhead = [r["wall_s"] - r["driver_wall_s"] for r in done if r["driver_wall_s"] is not None]
    median = lambda xs: round(statistics.median(xs), 3) if xs else None  # noqa: E731
    phases = {name for r in done for name in r["phases_s"]}
    return {
        "path": path,
        "slots": slots,
        "runs": runs,
        "wall_s": round(wall, 2),
        "runs_per_s": round(runs / wall, 3),
        "gpu_busy": round(statistics.mean(sampler.gpu), 3) if sampler.gpu else None,
        "cpu_busy": round(sampler.cpu_busy, 3),
        "cpu_s_per_run": round(sampler.cpu_s / runs, 2),
        "run_wall_s": median(walls),
        "driver_wall_s": median(driver),
        "overhead_s": median(overhead),
        # Where the driver's own wall went (tools/driver/phases.py), each phase's median.
        "phases_s": {p: median([r["phases_s"][p] for r in done if p in r["phases_s"]])
                     for p in sorted(phases)},  # fmt: skip
        "failed": [r for r in done if not r["ok"]],
    }


def profile(catalog, config, profiles: Path, logs: Path) -> None:
    """A cProfile of one process-per-run run of `config`, its top 40 lines beside it."""
    from dataclasses import replace

    prof = profiles / f"{config.name}.prof"
    words = list(catalog.target.run)
    at = words.index("-m")
    target = replace(catalog.target, run=tuple(words[:at] + ["-m", "cProfile", "-o", str(prof)]
                                                + words[at:]))  # fmt: skip
    run_config(target, config, REPO, logs, "", f"prof-{config.name}", gpus=1,
               ranks=catalog.ranks_for(config))  # fmt: skip
    top = subprocess.run(
        [sys.executable, "-c", "import pstats,sys; pstats.Stats(sys.argv[1])"
         ".sort_stats('cumulative').print_stats(40)", str(prof)],
        capture_output=True, text=True,
    ).stdout  # fmt: skip
    (profiles / f"{config.name}-top.txt").write_text(top)


def slots_default(batches: list[dict]) -> dict:
    """The runs at once the engine takes by default on this machine
    (tools/faults_cli/steps.py chosen_slots): the fewest worker slots whose
    runs a second come within 5 % of the most, past which a run's wall grows
    as fast as the count or faster. {} when no clean worker batch ran."""
    rows = [b for b in batches if b["path"] == "worker" and not b.get("variant") and not b["failed"]]
    if not rows:
        return {}
    best = max(rows, key=lambda b: b["runs_per_s"])
    chosen = min((b for b in rows if b["runs_per_s"] >= 0.95 * best["runs_per_s"]),
                 key=lambda b: b["slots"])  # fmt: skip
    basis = (
        f"{chosen['runs_per_s']} runs/s at {chosen['slots']} at once on the warm workers "
        f"(the most: {best['runs_per_s']} at {best['slots']})"
    )
    return {"slots_default": chosen["slots"], "slots_basis": basis}


def markdown(doc: dict) -> str:
    card = doc["card"]
    lines = [
        f"# Engine cost: {doc['machine']}, logical ranks",
        "",
        f"Source digest `{doc['source_digest']}`; card {card.get('name', '?')} "
        f"({card.get('memory.total', '?')}, SM clock max {card.get('clocks.max.sm', '?')}, "
        f"power limit {card.get('power.limit', '?')}); {doc['cpus']} CPUs. Written by "
        "`scripts/gpu/run_cost.py`.",
        "",
        "The bound: a run's kernels are microseconds of work; what a run costs beyond "
        "them is process start, CUDA context start, module loads and the host's checks. "
        "`overhead` is a run's wall beyond the driver's own wall.",
        "",
        "| path | slots | runs | runs/s | GPU busy | CPU busy | CPU s/run | run wall s "
        "| driver wall s | overhead s | failed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in doc["batches"]:
        lines.append(
            f"| {b['path']}{' ' + b['variant'] if b.get('variant') else ''} | {b['slots']} "
            f"| {b['runs']} | {b['runs_per_s']} | {b['gpu_busy']} | {b['cpu_busy']} "
            f"| {b['cpu_s_per_run']} | {b['run_wall_s']} | {b['driver_wall_s']} "
            f"| {b['overhead_s']} | {len(b['failed'])} |"
        )
    lines += ["", "Where the driver's wall went, each phase's median seconds a run "
              "(`context` is outside the driver's wall):", ""]  # fmt: skip
    for b in doc["batches"]:
        spent = ", ".join(f"{name} {seconds}" for name, seconds in b.get("phases_s", {}).items())
        lines.append(f"- {b['path']}{' ' + b['variant'] if b.get('variant') else ''} "
                     f"at {b['slots']}: {spent or 'not reported'}")  # fmt: skip
    lines += ["", f"Worker start (imports once): {doc.get('worker_import_s')} s."]
    for b in doc["batches"]:
        if "warm_up" in b:
            w = b["warm_up"]
            lines.append(
                f"- {b['path']}{' ' + b['variant'] if b.get('variant') else ''} at {b['slots']}: "
                f"its workers' first runs (started, then a run each; not in the batch) took "
                f"{w['wall_s']} s, a run {w['run_wall_s']} s, {w['failed']} failed"
            )
    if "slots_default" in doc:
        lines += ["", f"The engine's default `--slots` here: {doc['slots_default']} "
                  f"({doc['slots_basis']})."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = OneLineParser(prog="run_cost.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--results-dir", type=Path, default=None)
    parser.add_argument("--catalog", type=Path, default=REPO / "catalogs/afdep.toml")
    parser.add_argument("--configs", nargs="+", default=None, help="default: every config")
    parser.add_argument(
        "--process-slots", type=at_least(1), nargs="*", default=[8],
        help="runs at once on the process-per-run path (one batch each)",
    )  # fmt: skip
    parser.add_argument(
        "--worker-slots", type=at_least(1), nargs="*", default=[1, 4, 8, 12, 16],
        help="runs at once on the warm workers' path (one batch each)",
    )  # fmt: skip
    parser.add_argument("--runs-per-slot", type=at_least(1), default=3)
    parser.add_argument(
        "--worker-runs-per-slot", type=at_least(1), default=None,
        help="the worker batches' runs a slot (default: --runs-per-slot)",
    )  # fmt: skip
    parser.add_argument(
        "--variant", nargs="*", default=[],
        help="NAME=VALUE: one more worker batch at the largest --worker-slots with it set",
    )  # fmt: skip
    parser.add_argument("--profile", action="store_true", help="a cProfile of each config")
    args = parser.parse_args()
    bad = [word for word in args.variant if "=" not in word]
    if bad:
        parser.error(f"argument --variant: {bad[0]!r} is not NAME=VALUE")
    try:
        catalog = load_catalog(args.catalog).in_rank_mode(RankMode.LOGICAL)
    except CatalogError as error:
        parser.error(f"argument --catalog: {error}")
    named = {c.name: c for c in catalog.configs}
    unknown = [name for name in args.configs or [] if name not in named]
    if unknown:
        parser.error(f"argument --configs: no config {unknown[0]} in the catalog")
    configs = [named[n] for n in args.configs] if args.configs else list(catalog.configs)
    logs, profiles = args.out / "logs", args.out / "profiles"
    logs.mkdir(parents=True, exist_ok=True)
    profiles.mkdir(parents=True, exist_ok=True)
    doc: dict = {
        "machine": machine_name(),
        "card": gpu_card(),
        "cpus": os.cpu_count(),
        "rank_mode": str(RankMode.LOGICAL),
        "source_digest": source_digest(),
        "configs": [c.name for c in configs],
        "batches": [],
    }
    for config in configs if args.profile else []:
        profile(catalog, config, profiles, logs)
    if args.variant and not args.worker_slots:
        parser.error("argument --variant: a worker batch needs --worker-slots")
    plans = [("process", slots, {}) for slots in args.process_slots]
    plans += [("worker", slots, {}) for slots in args.worker_slots]
    plans += [("worker", max(args.worker_slots), dict([w.split("=", 1)])) for w in args.variant]
    for path, slots, variant in plans:
        # Each run's thread pools get the cores over the runs at once, as the engine's do.
        env = {**cpu_share(slots, os.environ, catalog.target.env, variant), **variant}
        workers, warm = None, None
        per_slot = args.runs_per_slot
        if path == "worker":
            workers = worker_pool(catalog.target, env, args.out / "workers")
            # Warm: every slot's worker started before the clock, as a sweep's are after its first runs.
            warm = batch(catalog, configs, logs, f"warm{slots}", slots, slots, workers, env)
            doc["worker_import_s"] = max(w.import_s for w in workers._all) if workers._all else None
            per_slot = args.worker_runs_per_slot or per_slot
        runs = max(slots * per_slot, len(configs))
        row = batch(catalog, configs, logs, path, slots, runs, workers, env)
        if warm is not None:  # what starting the workers cost: their first runs' wall
            row["warm_up"] = {k: warm[k] for k in ("wall_s", "run_wall_s", "driver_wall_s")}
            row["warm_up"]["failed"] = len(warm["failed"])
        row["env"] = env
        if variant:
            row["variant"] = " ".join(f"{k}={v}" for k, v in variant.items())
        if workers is not None:
            row["workers_started"] = workers.started
            workers.close()
        doc["batches"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "failed"}), flush=True)
    doc.update(slots_default(doc["batches"]))
    write_json(args.out / "run-cost.json", doc)
    if args.results_dir is not None:
        stem = results_stem("engine-cost", doc["machine"], RankMode.LOGICAL)
        write_json(args.results_dir / f"{stem}.json", doc)
        write_text(args.results_dir / f"{stem}.md", markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
