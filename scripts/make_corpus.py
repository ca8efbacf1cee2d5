"""Write corpus/afdep/*.patch from exact-once edits on a clone of the repo's HEAD."""
import subprocess, sys, shutil, textwrap
from pathlib import Path
REPO = Path(sys.argv[1]); OUT = REPO / "corpus/afdep"
SD, FC, FE = "afdep/csrc/impls/source_dispatch.cuh", "afdep/csrc/impls/ffn_combine.cuh", "afdep/csrc/impls/ffn_stream_epilogue.cuh"
FD, SC, CE = "afdep/csrc/impls/ffn_stream_dispatch.cuh", "afdep/csrc/impls/source_combine.cuh", "afdep/csrc/impls/copy_epilogue.cuh"
BUGS = [
 ("b01-done-barrier", "remove-barrier", "cf.source.done_release", "static", "count-first done counter: drop the CTA barrier before thread 0 publishes",
  [(SD, "    // @site cf.source.done_release{A}\n    __syncthreads();\n", "    // @site cf.source.done_release{A}\n")]),
 ("b02-pf-done-barrier", "remove-barrier", "pf.source.done_release", "static", "payload-first done counter: drop the CTA barrier before thread 0 publishes",
  [(SD, "    // @site pf.source.done_release{A}\n    __syncthreads();\n", "    // @site pf.source.done_release{A}\n")]),
 ("b03-count-barrier", "remove-barrier", "cf.source.count_release", "static", "counts: only CTA 0 stores them, so skip its barrier",
  [(SD, "    if (blockIdx.x == 0) {\n      __syncthreads();\n      if (thread_idx == 0) {\n        ptx::fence_acq_rel_sys();", "    if (blockIdx.x == 0) {\n      if (thread_idx == 0) {\n        ptx::fence_acq_rel_sys();")]),
 ("b04-prefix-barrier", "remove-barrier", "cf.ffn.prefix_release", "static", "placement: the compute's trailing barrier looks redundant",
  [(FD, "  // @site cf.ffn.prefix_release{A}\n  __syncthreads();\n", "  // @site cf.ffn.prefix_release{A}\n")]),
 ("b05-row-warp-sync", "remove-warp-sync", "cf.source.row_release", "static", "row flag: the warp is converged after the store loop, drop __syncwarp",
  [(SD, "        __syncwarp();\n        if (lane_idx == 0)\n          ptx::st_release_sys(peer_ptr<u64>(p, ffn_rank, p.off_slot_flags) + slot, epoch);", "        if (lane_idx == 0)\n          ptx::st_release_sys(peer_ptr<u64>(p, ffn_rank, p.off_slot_flags) + slot, epoch);")]),
 ("b06-combine-warp-sync", "remove-warp-sync", "cb.ffn.row_release", "static", "combine flag: drop the __syncwarp before lane 0 publishes",
  [(FC, "    __syncwarp();\n    if (lane_idx == 0) {\n      u64* flags", "    if (lane_idx == 0) {\n      u64* flags")]),
 ("b07-row-relaxed", "weaken-release", "cf.source.row_release", "static", "row flag: a relaxed store is enough after __syncwarp",
  [(SD, "          ptx::st_release_sys(peer_ptr<u64>(p, ffn_rank, p.off_slot_flags) + slot, epoch);", "          ptx::st_relaxed_sys(peer_ptr<u64>(p, ffn_rank, p.off_slot_flags) + slot, epoch);")]),
 ("b08-combine-relaxed", "weaken-release", "cb.ffn.row_release", "static", "combine flag: store it relaxed",
  [(FC, "      ptx::st_release_sys(flags +", "      ptx::st_relaxed_sys(flags +")]),
 ("b09-prefix-relaxed", "weaken-release", "cf.ffn.prefix_release", "static", "placement flag: relaxed store, the fence is gone too",
  [(FD, "    ptx::fence_acq_rel_sys();  // sources read the table too (ARM=source)\n    ptx::st_release_sys(", "    ptx::st_relaxed_sys(")]),
 ("b10-count-fence", "remove-fence", "cf.source.count_release", "static", "counts: publish with fence + relaxed stores, then drop the fence as redundant",
  [(SD, "        ptx::fence_acq_rel_sys();\n        for (int ffn = 0; ffn < num_ffn; ++ffn)\n          ptx::st_release_sys(peer_ptr<u64>(p, num_attention + ffn, p.off_count_ready) + rank_idx,", "        for (int ffn = 0; ffn < num_ffn; ++ffn)\n          ptx::st_relaxed_sys(peer_ptr<u64>(p, num_attention + ffn, p.off_count_ready) + rank_idx,")]),
 ("b11-row-wait-relaxed", "weaken-acquire", "cf.epilogue.row_wait", "static", "row wait: inline the spin with a relaxed load",
  [(FE, '            if (lane_idx == 0) wait_until(flags + slot, epoch, "cf.epilogue.row_wait", p);', '            if (lane_idx == 0)\n              while (ptx::ld_relaxed_sys(flags + slot) < epoch) __nanosleep(64);')]),
 ("b12-combine-wait-cg", "weaken-acquire", "cb.source.row_wait", "static", "combine wait: spin on an L2 load instead of the acquire",
  [(SC, '        wait_until(flags + static_cast<u64>(__ffs(pending) - 1) * capacity + token_idx, epoch,\n                   "cb.source.row_wait", p);', '        while (ptx::ld_cg_u64(flags + static_cast<u64>(__ffs(pending) - 1) * capacity + token_idx) <\n               epoch)\n          __nanosleep(64);')]),
 ("b13-row-gpu-scope", "narrow-scope", "cf.source.row_release", "static", "row flag: release at gpu scope",
  [(SD, "          ptx::st_release_sys(peer_ptr<u64>(p, ffn_rank, p.off_slot_flags) + slot, epoch);", "          ptx::st_release_gpu(peer_ptr<u64>(p, ffn_rank, p.off_slot_flags) + slot, epoch);")]),
 ("b14-combine-gpu-scope", "narrow-scope", "cb.ffn.row_release", "static", "combine flag: release at gpu scope",
  [(FC, "      ptx::st_release_sys(flags +", "      ptx::st_release_gpu(flags +")]),
 ("b15-row-wait-epoch", "epoch-off-by-one", "cf.epilogue.row_wait", "run", "row wait: compare against the previous epoch",
  [(FE, 'wait_until(flags + slot, epoch, "cf.epilogue.row_wait", p);', 'wait_until(flags + slot, epoch - 1, "cf.epilogue.row_wait", p);')]),
 ("b16-combine-wait-epoch", "epoch-off-by-one", "cb.source.row_wait", "run", "combine wait: compare against the previous epoch",
  [(SC, '* capacity + token_idx, epoch,\n                   "cb.source.row_wait", p);', '* capacity + token_idx, epoch - 1,\n                   "cb.source.row_wait", p);')]),
 ("b17-done-wait-epoch", "epoch-off-by-one", "pf.epilogue.done_wait", "run", "payload-first done wait: one epoch short",
  [(CE, 'wait_until(done + source, epoch * p.source_ctas, "pf.epilogue.done_wait", p);', 'wait_until(done + source, (epoch - 1) * p.source_ctas, "pf.epilogue.done_wait", p);')]),
 ("b18-row-flag-slot", "wrong-slot", "cf.source.row_release", "run", "row flag: index off by one slot",
  [(SD, "p.off_slot_flags) + slot, epoch);", "p.off_slot_flags) + slot + 1, epoch);")]),
 ("b19-combine-peer", "wrong-peer", "cb.ffn.row_release", "run", "combine flag: written to this rank's flags instead of the source's",
  [(FC, "      u64* flags = peer_ptr<u64>(p, source, p.off_combine_flags);", "      u64* flags = peer_ptr<u64>(p, rank_idx, p.off_combine_flags);")]),
 ("b20-count-peer", "wrong-peer", "cf.source.count_release", "run", "count flag: published on this rank",
  [(SD, "ptx::st_release_sys(peer_ptr<u64>(p, num_attention + ffn, p.off_count_ready) + rank_idx,", "ptx::st_release_sys(peer_ptr<u64>(p, rank_idx, p.off_count_ready) + rank_idx,")]),
 ("b21-row-publish-early", "publish-early", "cf.source.row_release", "static", "row flag: release before the row, to overlap the flag with the copy",
  "MOVE"),
 ("b22-row-wait-removed", "remove-wait", "cf.epilogue.row_wait", "static", "row wait: the gate covers it, drop the per-row wait",
  [(FE, '            if (lane_idx == 0) wait_until(flags + slot, epoch, "cf.epilogue.row_wait", p);\n            __syncwarp();\n', '')]),
 ("b23-prefix-wait-barrier", "remove-barrier", "cf.epilogue.prefix_wait", "static", "prefix wait: thread 0 waited, skip the barrier",
  [(FE, '               "cf.epilogue.prefix_wait", p);\n  __syncthreads();\n', '               "cf.epilogue.prefix_wait", p);\n')]),
 ("b24-count-tokens", "wrong-count", "cf.source.count_put", "run", "counts: report one token more than sent",
  [(SD, "      put_counts<kNumThreads>(p, bits, prefix, words, num_tokens, kProtocolCountFirst,", "      put_counts<kNumThreads>(p, bits, prefix, words, num_tokens + 1, kProtocolCountFirst,")]),
]
import re
def attrs(text, site):
    m = re.search(r"// @site " + re.escape(site) + r"(.*)\n", text)
    return m.group(1)
work = Path("/tmp/corpus/clone"); shutil.rmtree(work, ignore_errors=True)
subprocess.run(["git", "clone", "-q", "--shared", str(REPO), str(work)], check=True)
OUT.mkdir(parents=True, exist_ok=True)
for name, klass, site, catch, title, edits in BUGS:
    subprocess.run(["git", "-C", str(work), "checkout", "-q", "--", "."], check=True)
    if edits == "MOVE":
        p = work / SD; s = p.read_text()
        store_open = re.search(r"        // @site cf\.source\.row_store.*\n", s).group(0)
        rel = re.search(r"        // @site cf\.source\.row_release.*\n(?:.*\n)*?        // @end cf\.source\.row_release\n", s).group(0)
        assert s.count(rel) == 1 and s.count(store_open) == 1
        s = s.replace(rel, "").replace(store_open, rel + store_open)
        p.write_text(s)
    else:
        for f, old, new in edits:
            p = work / f; s = p.read_text()
            if "{A}" in old:
                a = attrs(s, site); old = old.replace("{A}", a); new = new.replace("{A}", a)
            assert s.count(old) == 1, (name, old)
            p.write_text(s.replace(old, new))
    diff = subprocess.run(["git", "-C", str(work), "diff"], check=True, capture_output=True, text=True).stdout
    assert diff, name
    (OUT / f"{name}.patch").write_text(f"class: {klass}\nsite: {site}\ncatch: {catch}\ntitle: {title}\n\n{diff}")
print(len(BUGS), "bugs,", len({b[1] for b in BUGS}), "classes")
