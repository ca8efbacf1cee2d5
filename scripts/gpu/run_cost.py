"""What one fault-engine run costs on this GPU machine, and where it goes: the
clean tree of a catalog run as the engine runs it (faults.pipeline.run.
run_config: the catalog's logical-rank command, its env, its timeout), alone
and N at a time. The review's --run time is its runs over the runs a second
this machine completes, so this says which bound holds that rate: the
process start (imports), the driver's own steps, the CPU or the GPU.

    python3 scripts/gpu/run_cost.py --out DIR [--configs NAME...] [--at-once N...]

Writes DIR/run-cost.json (per run: wall, the driver's own wall, CPU seconds;
per batch: wall, runs a second, CPU and GPU busy sampled every 0.5 s),
DIR/run-cost.txt (the same, a line each) and DIR/profiles/ (a cProfile and
a -X importtime of one run of each config, alone).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from afdep.vocab import parse_log  # noqa: E402
from faults.catalog import CatalogError, load_catalog  # noqa: E402
from faults.pipeline.run import run_config  # noqa: E402
from hostio import OneLineParser, RankMode, at_least  # noqa: E402


def cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


class Sampler:
    """CPU and GPU busy fractions every 0.5 s while it runs."""

    def __init__(self):
        self.cpu: list[float] = []
        self.gpu: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        last = cpu_busy()
        while not self.stop.wait(0.5):
            now = cpu_busy()
            self.cpu.append((now[0] - last[0]) / max(now[1] - last[1], 1.0))
            last = now
            try:
                said = subprocess.run(
                    ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                ).stdout.split()
            except (OSError, subprocess.TimeoutExpired):  # no nvidia-smi here: CPU alone
                said = []
            if said:
                self.gpu.append(float(said[0]) / 100)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def means(self) -> dict:
        mean = lambda xs: round(sum(xs) / len(xs), 3) if xs else None  # noqa: E731
        return {"cpu_busy": mean(self.cpu), "gpu_busy": mean(self.gpu), "samples": len(self.cpu)}


def one_run(
    catalog, config, out: Path, name: str, prefix: tuple[str, ...] = (), env: dict | None = None
) -> dict:
    """One clean run of `config` as the engine makes it (`prefix`: words put
    between the interpreter and `-m tools.driver`, a profiler's; `env` over
    the config's)."""
    target = catalog.target
    if prefix:
        words = list(target.run)
        at = words.index("-m")
        target = replace(target, run=tuple(words[:at] + list(prefix) + words[at:]))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    outcome = run_config(
        target, config, REPO, out, "", name, gpus=1, ranks=catalog.ranks_for(config), env=env
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = (out / f"{name}.log").read_text(errors="replace")
    results = parse_log(text).results  # the driver's AFDEP_RESULT line(s)
    driver = results[-1] if results else {}
    return {
        "config": config.name,
        "exit": outcome.exit_code,
        "wall_s": round(wall, 2),
        "driver_wall_s": driver.get("wall_s"),
        "ok": driver.get("ok"),
        # whole-process CPU (children reaped so far: exact alone, shared at once)
        "cpu_s": round(
            (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2
        ),
    }


def batch(catalog, config, out: Path, count: int, env: dict | None = None) -> dict:
    """`count` runs of `config` started together (`env` over the config's)."""
    runs: list[dict] = []
    tag = "-".join(f"{k}={v}" for k, v in (env or {}).items())

    def run(i: int) -> None:
        runs.append(one_run(catalog, config, out, f"at{count}{tag and '-' + tag}-{i}", env=env))

    with Sampler() as sampler:
        started = time.perf_counter()
        threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
    walls = sorted(r["wall_s"] for r in runs)
    return {
        "config": config.name,
        "env": env or {},
        "at_once": count,
        "wall_s": round(wall, 2),
        "runs_per_s": round(count / wall, 3),
        "run_wall_s": {"min": walls[0], "max": walls[-1]},
        "all_ok": all(r["ok"] for r in runs),
        **sampler.means(),
    }


def main() -> int:
    parser = OneLineParser(prog="run_cost.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--catalog", type=Path, default=REPO / "catalogs/afdep.toml")
    parser.add_argument("--configs", nargs="+", default=["bf16-graph", "4gpu-f2"])
    parser.add_argument("--at-once", type=at_least(1), nargs="+", default=[1, 4, 8, 12])
    parser.add_argument(
        "--variant",
        nargs="+",
        default=["OMP_NUM_THREADS=1"],
        help="NAME=VALUE settings, each a batch of the largest --at-once with it set",
    )
    args = parser.parse_args()
    bad = [word for word in args.variant if "=" not in word]
    if bad:
        print(f"run_cost.py: error: --variant {bad[0]}: not NAME=VALUE", file=sys.stderr)
        return 2
    try:
        catalog = load_catalog(args.catalog).in_rank_mode(RankMode.LOGICAL)
    except CatalogError as error:
        print(f"run_cost.py: error: --catalog {args.catalog}: {error}", file=sys.stderr)
        return 2
    named = {c.name: c for c in catalog.configs}
    unknown = [name for name in args.configs if name not in named]
    if unknown:
        said = f"run_cost.py: error: --configs: no config {unknown[0]} in the catalog"
        print(said, file=sys.stderr)
        return 2
    logs, profiles = args.out / "logs", args.out / "profiles"
    logs.mkdir(parents=True, exist_ok=True)
    profiles.mkdir(parents=True, exist_ok=True)
    doc: dict = {"alone": [], "batches": []}
    for name in args.configs:
        config = named[name]
        for repeat in range(2):
            doc["alone"].append(one_run(catalog, config, logs, f"alone-{name}-{repeat}"))
            print(json.dumps(doc["alone"][-1]), flush=True)
        prof = profiles / f"{name}.prof"
        one_run(catalog, config, logs, f"prof-{name}", ("-m", "cProfile", "-o", str(prof)))
        imports = one_run(catalog, config, logs, f"imports-{name}", ("-X", "importtime"))
        print(f"imports {name}: {imports['wall_s']} s", flush=True)
        top = subprocess.run(
            [sys.executable, "-c", "import pstats,sys; pstats.Stats(sys.argv[1])"
             ".sort_stats('cumulative').print_stats(30)", str(prof)],
            capture_output=True, text=True,
        ).stdout  # fmt: skip
        (profiles / f"{name}-top.txt").write_text(top)
    first = named[args.configs[0]]
    for count in args.at_once:
        doc["batches"].append(batch(catalog, first, logs, count))
        print(json.dumps(doc["batches"][-1]), flush=True)
    for word in args.variant:
        name, value = word.split("=", 1)
        doc["batches"].append(batch(catalog, first, logs, max(args.at_once), {name: value}))
        print(json.dumps(doc["batches"][-1]), flush=True)
    (args.out / "run-cost.json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [json.dumps(row) for row in [*doc["alone"], *doc["batches"]]]
    (args.out / "run-cost.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
