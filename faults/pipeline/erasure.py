"""Erased faults (docs/verdicts.md, "Erased faults"): a fault whose tree,
its markers left out, compiles to the clean tree's machine code changes
nothing the hardware executes, so no run of it can show anything. The
catalog's `[target.sass] cubin` command writes the cubin of every kernel
variant of a tree (`<file>.cubin` and `index.json`, file -> label; a command
that writes each cubin whole as it is made lets the check stop it at the
first that differs); nvdisasm disassembles each, and the SASS of each
function is compared with the compiler's noise taken out: addresses, register
and label numbering, operand reuse hints and the offsets of global addresses
in constant bank 4.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from faults.catalog import Catalog, Target
from faults.catalog.errors import FaultsError
from faults.judge.verdict import Judgement, Verdict
from faults.pipeline.apply import apply_patches
from faults.pipeline.scratch import target_scratch, tree_digest
from hostio import cache_home, cuda_tool, cuda_toolkit_bin, run_logged, write_text

TOOL = "nvdisasm"
WHEEL = "nvidia-cuda-nvdisasm"
CACHE_ENTRIES = 16  # clean trees' SASS kept per target
POLL_S = 0.02  # how often the check looks for the cubins the command has written
NORMALIZATION = 3  # part of the cache key: a change to normalize() or the entry bumps it

ADDRESS = re.compile(r"/\*[0-9a-fA-F]+\*/")
REGISTER = re.compile(r"\b(UP|UR|P|R|B)(\d+)\b")
LABEL = re.compile(r"\.L_x_(\d+)")
GLOBAL_ADDRESS = re.compile(r"c\[0x4\]\[0x[0-9a-fA-F]+\]")
FUNCTION = re.compile(r"^\.text\.(\S+):$")
ENTRY = re.compile(r"^[A-Za-z_][\w.]*:$")  # a function's own symbol, before its section label
# Lines that say where code lies, not what it does.
LAYOUT = (".section", ".align", ".weak", ".global", ".type", ".size", ".other", "//")


class SassError(FaultsError):
    """No disassembler, or cubins that cannot be made or read; one line."""


def find_tool(name: str = TOOL) -> Path:
    """`name` on PATH, in the CUDA toolkit, or in the NVIDIA wheel's bin folder
    (hostio.cuda_tool)."""
    found = cuda_tool(name)
    if found is None:
        raise SassError(
            f"{name} not found on PATH, in {cuda_toolkit_bin()} nor in the {WHEEL} wheel: "
            f"pip install {WHEEL}"
        )
    return found


# ----------------------------------------------------------- normalization
def _renumbered(line: str, registers: dict, labels: dict) -> str:
    """Registers of each class and labels numbered by first appearance in
    their function: a renaming keeps which operands are the same register."""

    def register(match: re.Match) -> str:
        names = registers.setdefault(match[1], {})
        return f"{match[1]}{names.setdefault(match[2], len(names))}"

    line = REGISTER.sub(register, line)
    return LABEL.sub(lambda m: f".L{labels.setdefault(m[1], len(labels))}", line)


def normalize(sass: str) -> dict[str, str]:
    """nvdisasm's code listing -> {function symbol: its normalized SASS}."""
    functions: dict[str, list[str]] = {}
    lines: list[str] | None = None
    registers: dict = {}
    labels: dict = {}
    for raw in sass.splitlines():
        text = ADDRESS.sub("", raw).strip()
        if not text or text.startswith(LAYOUT):
            continue
        if lines is None and not text.startswith(".text"):
            continue  # the header: .target, .elftype
        start = FUNCTION.match(text)
        if start:
            lines, registers, labels = functions.setdefault(start[1], []), {}, {}
            continue
        if ENTRY.match(text):
            continue
        text = GLOBAL_ADDRESS.sub("c[0x4][ADDR]", text.replace(".reuse", ""))
        lines.append(" ".join(_renumbered(text, registers, labels).split()))
    return {name: "\n".join(body) + "\n" for name, body in functions.items()}


def disassemble(cubin: Path, tool: Path, timeout_s: float) -> dict[str, str]:
    """The normalized SASS of each function of `cubin`."""
    listing = cubin.with_suffix(".sass")
    outcome = run_logged([str(tool), "-c", str(cubin)], listing, timeout_s=timeout_s)
    text = listing.read_text(errors="replace")
    if outcome.exit_code != 0:
        last = (text.strip().splitlines() or ["-"])[-1]
        raise SassError(f"{tool.name} {cubin.name} failed (exit {outcome.exit_code}): {last}")
    return normalize(text)


# --------------------------------------------------------------- cubins
def write_cubins(
    target: Target, tree_root: Path, out: Path, stop: threading.Event | None = None
) -> dict[str, str] | None:
    """Run `[target.sass] cubin` on the tree (it first on PYTHONPATH, as the
    build runs); returns its index (cubin file -> variant label), or None
    when `stop` was set first (the command is then ended)."""
    sources = tree_root / target.sources
    values = {"python": sys.executable, "tree": tree_root, "sources": sources, "out": out}
    command = [word.format(**{k: str(v) for k, v in values.items()}) for word in target.sass]
    env = {**os.environ, **target.env, "PYTHONPATH": str(tree_root), "PYTHONSAFEPATH": "1"}
    out.mkdir(parents=True, exist_ok=True)
    log = out.parent / f"{out.name}.log"
    try:
        outcome = run_logged(
            command, log, timeout_s=target.timeout_s, env=env, cwd=tree_root, stop=stop
        )
    except OSError as error:
        raise SassError(f"the sass command could not start {command[0]!r}: {error}") from None
    if stop is not None and stop.is_set():  # ended, or its caller needs it no more
        return None
    index_path = out / "index.json"
    if outcome.exit_code != 0 or not index_path.is_file():
        what = "wrote no index.json" if outcome.exit_code == 0 else f"exit {outcome.exit_code}"
        raise SassError(f"the sass command failed ({what}); log: {log}")
    return json.loads(index_path.read_text())


def default_cache(target: Target) -> Path:
    return cache_home() / "faults" / target.name / "sass"


@dataclass
class ErasedCheck:
    """Decides, before a fault's build and its runs, whether the compiler
    erased it: the fault applied with no marker (a marker is code of
    its own) in a scratch tree beside the fault's, its cubins against the
    clean tree's, whose SASS is kept per sources digest."""

    catalog: Catalog
    root: Path
    workdir: Path
    ref: str | None = None
    cache: Path | None = None
    tool: Path = field(default_factory=find_tool)
    # The clean tree's code: {"sha256": cubin file -> its bytes' digest,
    # "sass": cubin file -> function -> normalized text, "labels": cubin file -> variant}.
    _clean: dict[str, dict] | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    @property
    def target(self) -> Target:
        return self.catalog.target

    def clean(self) -> dict[str, dict]:
        """The clean tree's cubin digests and SASS, from the cache or made once."""
        with self._lock:
            if self._clean is None:
                tree = self.workdir / "sass-clean"
                shutil.rmtree(tree, ignore_errors=True)
                sources = target_scratch(self.root, tree, self.target, ref=self.ref)
                apply_patches(sources, self.catalog, [], bare=True)  # as it runs: bounded
                self._clean = self._cached(tree)
                shutil.rmtree(tree, ignore_errors=True)
            return self._clean

    def _cached(self, tree: Path) -> dict[str, dict]:
        root = Path(self.cache) if self.cache is not None else default_cache(self.target)
        words = "\0".join([str(NORMALIZATION), *self.target.sass]).encode()
        key = hashlib.sha256(words + tree_digest(tree / self.target.sources).encode())
        path = root / f"{key.hexdigest()[:32]}.json"
        if path.is_file():
            os.utime(path)
            return json.loads(path.read_text())
        made = self._variants(tree, tree.parent / "sass-clean-cubins")
        write_text(path, json.dumps(made))  # whole or not at all: other sweeps read it
        for stale in sorted(root.glob("*.json"), key=lambda p: p.stat().st_mtime)[:-CACHE_ENTRIES]:
            stale.unlink(missing_ok=True)
        return made

    def _variants(self, tree: Path, out: Path) -> dict[str, dict]:
        shutil.rmtree(out, ignore_errors=True)
        try:
            index = write_cubins(self.target, tree, out)
            with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                listings = pool.map(self._disassemble, [out / name for name in index])
                sass = dict(zip(index, listings, strict=True))
            sha256 = {name: _file_sha256(out / name) for name in index}
            return {"sha256": sha256, "sass": sass, "labels": index}
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def _disassemble(self, cubin: Path) -> dict[str, str]:
        return disassemble(cubin, self.tool, self.target.timeout_s)

    def difference(self, tree: Path, out: Path) -> tuple[str | None, int]:
        """The first way `tree`'s code differs from the clean tree's (None:
        none), and the variants compared. Each cubin is read the moment the
        command writes it, one at a time: one byte for byte the clean one's
        (the target's cache gave both the same compile) is the same code
        without a disassembly, and the first whose SASS differs ends the
        command, its other variants neither compiled nor disassembled. Only
        an erased fault's tree is compiled and compared whole."""
        clean = self.clean()
        shutil.rmtree(out, ignore_errors=True)
        stop = threading.Event()
        try:
            with ThreadPoolExecutor(1) as pool:
                command = pool.submit(write_cubins, self.target, tree, out, stop)
                try:
                    found = self._first_difference(command, out, clean)
                finally:
                    stop.set()  # a command still running is ended; the pool waits for it
            if found is not None:
                return found, len(clean["sass"])
            index = command.result()  # the command's own failure, said
            if set(index) != set(clean["sass"]):
                return f"its variants differ: {sorted(set(index) ^ set(clean['sass']))}", len(index)
            return None, len(index)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def _first_difference(self, command: Future, out: Path, clean: dict[str, dict]) -> str | None:
        """Each cubin as the command writes it, until one differs (how) or
        the command has ended with none that does (None)."""
        seen: set[str] = set()
        while True:
            finished = command.done()
            for name in _new_cubins(out, seen):
                found = self._compared(name, out / name, clean)
                if found is not None:
                    return found
            if finished:
                return None
            time.sleep(POLL_S)

    def _compared(self, name: str, cubin: Path, clean: dict[str, dict]) -> str | None:
        """How the cubin `name` differs from the clean tree's (None: it does not)."""
        if name not in clean["sha256"]:
            return f"its variants differ: {[name]}"
        if _file_sha256(cubin) == clean["sha256"][name]:
            return None
        found = _function_difference(clean["sass"][name], self._disassemble(cubin))
        return f"{clean['labels'][name]}: {found}" if found else None

    def __call__(self, fault_id: str, folder: Path) -> Judgement | None:
        """ERASED when the fault's unmarked tree compiles to the clean SASS;
        None when it does not (the fault runs)."""
        tree = folder / "unmarked"
        shutil.rmtree(tree, ignore_errors=True)
        sources = target_scratch(self.root, tree, self.target, ref=self.ref)
        try:
            apply_patches(sources, self.catalog, self.catalog.all_patches(fault_id), bare=True)
            found, variants = self.difference(tree, folder / "unmarked-cubins")
        finally:
            shutil.rmtree(tree, ignore_errors=True)
        if found is not None:
            return None
        return erased_judgement(self.catalog.fault(fault_id).expect, variants)


def _new_cubins(out: Path, seen: set[str]) -> list[str]:
    """The cubins written under `out` since the last call (a cubin appears
    whole, renamed from a temporary name that does not end in .cubin)."""
    names = sorted(p.name for p in out.glob("*.cubin")) if out.is_dir() else []
    new = [name for name in names if name not in seen]
    seen.update(new)
    return new


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _function_difference(clean: dict[str, str], faulted: dict[str, str]) -> str | None:
    if set(clean) != set(faulted):
        return f"its functions differ: {sorted(set(clean) ^ set(faulted))}"
    for name, text in faulted.items():
        if text != clean[name]:
            old, new = clean[name].splitlines(), text.splitlines()
            same = [a == b for a, b in zip(old, new, strict=False)]
            at = same.index(False) if False in same else len(same)
            return f"{name} line {at + 1} of its normalized SASS"
    return None


def erased_judgement(expect: str, variants: int) -> Judgement:
    """A must-fail mutant the compiler erased is an equivalent one (outside the
    score, listed); a must-pass fault it erased proves nothing: not met."""
    same = (
        f"every kernel's SASS ({variants} variants) is the clean tree's, addresses and "
        "register numbers aside: the compiler erased the change; not run"
    )
    if expect == "fail":
        return Judgement(Verdict.ERASED, True, same)
    return Judgement(Verdict.ERASED, False, f"{same}; a must-pass fault it erases proves nothing")


def erased_check(
    catalog: Catalog, root: Path, workdir: Path, ref: str | None
) -> ErasedCheck | None:
    """The catalog's check (None when it declares no `[target.sass]`)."""
    if not catalog.target.sass:
        return None
    return ErasedCheck(catalog, root, workdir, ref)


# A fault id and its folder -> ERASED, or None when the compiler kept the change.
ErasedDecision = Callable[[str, Path], "Judgement | None"]


def erasure_baseline(check: ErasedDecision | None) -> float:
    """Seconds to make `check`'s clean-tree code now, if it keeps one
    (`clean()`, as ErasedCheck does): made before the faults, it counts once,
    on the clean control, not in every fault a sweep prepares at once (they
    would all wait for it). A failure is left to each fault's check to say."""
    baseline = getattr(check, "clean", None)
    if baseline is None:
        return 0.0
    started = time.perf_counter()
    with contextlib.suppress(SassError):
        baseline()
    return time.perf_counter() - started


def decide(
    check: ErasedDecision, fault_id: str, folder: Path
) -> tuple[Judgement | None, float, str]:
    """The decision, its seconds, and why none was made ("" when one was): a
    check that fails leaves the fault to run, and says why."""
    started = time.perf_counter()
    try:
        judgement, unknown = check(fault_id, folder), ""
    except SassError as error:
        judgement, unknown = None, f"not checked for erasure: {error}"
    return judgement, time.perf_counter() - started, unknown
