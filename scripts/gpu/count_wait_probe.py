"""Probe prints in a scratch tree of the count_wait epoch mutant (usage:
count_wait_probe.py TREE): globaltimer at attention_dispatch's start and count
release, and at ffn_place's entry (with the count flag it saw) and end (with the
row total it placed). docs/architecture.md, "Delays that expose", has what
they showed; scripts/gpu/count_wait_probe.sh runs them."""

import sys
from pathlib import Path


def probe(condition: str, event: str, fields: str, values: str) -> str:
    """One thread's printf of `event`, its fields and the globaltimer."""
    return (
        f'if ({condition}) printf("CWPROBE {event} rank=%d epoch=%llu{fields} t=%llu\\n", '
        f"rank_idx, epoch{values}, ptx::globaltimer());\n"
    )


def insert(path: Path, anchor: str, code: str, *, before: bool) -> None:
    text = path.read_text()
    if anchor not in text:
        raise SystemExit(f"{path}: no {anchor!r} to probe at")
    path.write_text(text.replace(anchor, code + anchor if before else anchor + code, 1))


def main(tree: Path) -> None:
    impls = tree / "afdep/csrc/impls"
    place, dispatch = impls / "ffn_place.cuh", impls / "attention_dispatch.cuh"
    seen = " *(volatile const u64*)peer_ptr<const u64>(p, rank_idx, p.off_count_ready)"
    insert(
        place,
        "  if (thread_idx == 0) {\n    const u64* count_ready",
        "  " + probe("thread_idx == 0", "place_enter", " seen=%llu", "," + seen),
        before=True,
    )
    insert(
        place,
        "  // @end cf.ffn_place.prefix_release\n",
        "  "
        + probe(
            "thread_idx == 0", "place_done", " total=%d", ", placement.offsets[experts_per_ffn]"
        ),
        before=True,
    )
    first = "kCountFirst && blockIdx.x == 0 && thread_idx == 0"
    insert(
        dispatch,
        "  u32* bits = smem;\n",
        "  " + probe(first, "disp_enter", " tokens=%d", ", num_tokens"),
        before=False,
    )
    insert(
        dispatch,
        "    // @end cf.attention_dispatch.count_release\n",
        "    " + probe("blockIdx.x == 0 && thread_idx == 0", "disp_released", "", ""),
        before=True,
    )
    print("instrumented", place, dispatch)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
