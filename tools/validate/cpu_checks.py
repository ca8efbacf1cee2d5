"""The reference checked on the CPU: what tools can verify with no GPU."""

from __future__ import annotations

from invariants.data.inputs import make_source_inputs
from invariants.data.layout import LayoutError, check_collect_view, check_expert_layout
from invariants.data.reference import apply_experts, combine_reference, dispatch_reference

# (attention ranks, FFN ranks, experts, payload): the shapes the driver runs, small.
CASES = (
    (1, 1, 128, "bf16"),
    (1, 1, 128, "fp8"),
    (2, 2, 16, "bf16"),
    (3, 1, 32, "fp8"),
    (1, 3, 96, "bf16"),
)


def reference_self_check(capacity: int = 64, hidden: int = 256, top_k: int = 8) -> int:
    """Build each case's reference, hold it against the layout invariants and
    run combine; print one line per case. Returns 0 when all held."""
    failures = 0
    for attention, ffn, experts, payload in CASES:
        shape = {"capacity": capacity, "hidden": hidden, "top_k": top_k, "payload": payload}
        sources = [
            make_source_inputs(
                rank=a, step=0, seed=7, num_tokens=capacity - 3 * a, num_experts=experts, **shape
            )
            for a in range(attention)
        ]
        name = f"reference {attention}A:{ffn}F E={experts} {payload}"
        try:
            references = dispatch_reference(sources, experts, ffn)
            for f, (layout, view) in enumerate(references):
                check_expert_layout(layout, sources, f, experts, ffn)
                check_collect_view(view, layout, sources, f, experts, ffn)
            layouts = [layout for layout, _ in references]
            ys = [apply_experts(layout, f, experts, ffn) for f, layout in enumerate(layouts)]
            outs = combine_reference(sources, layouts, ys, experts, ffn)
            rows = sum(int(layout.expert_offsets[-1]) for layout in layouts)
            print(f"{name}: ok ({rows} expert rows, {sum(o.shape[0] for o in outs)} tokens out)")
        except LayoutError as error:
            failures += 1
            print(f"{name}: FAILED {error}")
    return 1 if failures else 0
