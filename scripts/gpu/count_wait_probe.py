"""Probe prints in a scratch tree of the count_wait epoch mutant (usage:
count_wait_probe.py TREE): globaltimer at attention_dispatch's start and count
release, and at ffn_place's entry (with the count flag it saw) and end (with the
row total it placed). docs/history.md, "Delays that expose", has what
they showed; scripts/gpu/count_wait_probe.sh runs them."""

import sys
from pathlib import Path

from hostio import OneLineParser


def probe(condition: str, event: str, fields: str, values: str) -> str:
    """One thread's printf of `event`, its fields and the globaltimer."""
    return (
        f'if ({condition}) printf("CWPROBE {event} rank=%d epoch=%llu{fields} t=%llu\\n", '
        f"rank_idx, epoch{values}, ptx::globaltimer());\n"
    )


# (file, anchor, code, before the anchor?) for each probe.
def edits(impls: Path) -> list[tuple[Path, str, str, bool]]:
    place, dispatch = impls / "ffn_place.cuh", impls / "attention_dispatch.cuh"
    seen = " *(volatile const u64*)peer_ptr<const u64>(p, rank_idx, p.off_count_ready)"
    total = ", placement.offsets[experts_per_ffn]"
    first = "kCountFirst && blockIdx.x == 0 && thread_idx == 0"
    return [
        (
            place,
            "  if (thread_idx == 0) {\n    const u64* count_ready",
            "  " + probe("thread_idx == 0", "place_enter", " seen=%llu", "," + seen),
            True,
        ),
        (
            place,
            "  // @end cf.ffn_place.prefix_release\n",
            "  " + probe("thread_idx == 0", "place_done", " total=%d", total),
            True,
        ),
        (
            dispatch,
            "  u32* bits = smem;\n",
            "  " + probe(first, "disp_enter", " tokens=%d", ", num_tokens"),
            False,
        ),
        (
            dispatch,
            "    // @end cf.attention_dispatch.count_release\n",
            "    " + probe("blockIdx.x == 0 && thread_idx == 0", "disp_released", "", ""),
            True,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="count_wait_probe.py", description=__doc__)
    parser.add_argument("tree", type=Path, help="a scratch tree of the count_wait epoch mutant")
    args = parser.parse_args(argv)
    impls = args.tree / "afdep/csrc/impls"
    texts: dict[Path, str] = {}
    for path, anchor, code, before in edits(impls):  # every anchor found before any write
        if path not in texts:
            if not path.is_file():
                parser.error(f"tree {args.tree}: no {path.relative_to(args.tree)}")
            texts[path] = path.read_text()
            if "CWPROBE" in texts[path]:
                parser.error(f"{path}: probed already")
        if anchor not in texts[path]:
            parser.error(f"{path}: no {anchor.strip()!r} to probe at")
        new = code + anchor if before else anchor + code
        texts[path] = texts[path].replace(anchor, new, 1)
    for path, text in texts.items():
        path.write_text(text)
    print("instrumented", *texts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
