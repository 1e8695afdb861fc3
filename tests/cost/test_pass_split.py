"""The accumulator pass split (``phaze.cost.gemm_chip.PASS_SPLITS``) and the evaluation of a GEMM once per
distinct (core kind, core count, GLB bytes per cycle): each chip of a large set gets what it gets alone."""
import numpy as np

import phaze.cost.gemm_chip as gc
from phaze.cost.gemm import gemm_terms
from phaze.cost.onchip import bandwidth_cap
from phaze.hardware.accelerator import ArchArrays
from phaze.workload.ops import Gemm

from chiphelpers import small_chip as chip

G = Gemm("g", 1, 2048, 1024, 512)


def _chips():
    """Two core kinds (accumulator of 1024 and of 256 rows), four GLBs, each chip three times: 24 chips in
    8 distinct (kind, bandwidth) pairs, so the grouped path is taken."""
    accs = [chip(banks=b, acc=a * 128 * 4) for a in (1024, 256) for b in (1, 4, 16, 64)]
    return accs * 3


def test_grouped_evaluation_equals_each_chip_alone():
    accs = _chips()
    arch = ArchArrays.from_accelerators(accs)
    c = np.ones(len(accs))
    assert gc._groups(arch, c, gc.glb_bandwidth_Bps(arch, "tc", c) * gc._chip_consts(arch)["cycle_s"]) is not None
    together = gemm_terms(G, arch, 1)
    for i, a in enumerate(accs):
        alone = gemm_terms(G, ArchArrays.from_accelerators([a]), 1)
        for key in ("latency_s", "compute_s", "glb_s", "glb_bytes", "acc_row_accesses", "operand_row_loads"):
            assert together[key][i] == alone[key][0], (i, key)
        assert bool(together["streams_m"][i]) == bool(alone["streams_m"][0])


def test_a_bandwidth_capped_copy_does_not_reuse_the_uncapped_groups():
    arch = ArchArrays.from_accelerators(_chips())
    full = gemm_terms(G, arch, 1)["latency_s"]
    capped = bandwidth_cap(arch, 64e9, 1e15)  # shares arch's memo (its derived figures), not its bandwidth
    slow = gemm_terms(G, capped, 1)["latency_s"]
    again = gemm_terms(G, ArchArrays.from_accelerators(_chips()), 1)["latency_s"]
    alone = gemm_terms(G, bandwidth_cap(ArchArrays.from_accelerators(_chips()[:1]), 64e9, 1e15), 1)["latency_s"]
    assert (slow > full).all() and slow[0] == alone[0] and (again == full).all()
    assert (gemm_terms(G, arch, 1)["latency_s"] == full).all()


def test_the_split_never_slows_a_gemm_and_takes_the_fewest_passes_within_the_gain():
    arch = ArchArrays.from_accelerators(_chips()[:8])
    one = gemm_terms(G, arch, 1, pass_splits=(1,))["latency_s"]
    each = {s: gemm_terms(G, arch, 1, pass_splits=(s,))["latency_s"] for s in gc.PASS_SPLITS}
    terms = gemm_terms(G, arch, 1)
    best = terms["latency_s"]
    assert (best <= one).all()
    # the 256-row accumulator on one 512 B bank takes a split (2.0% faster); the others keep one pass
    assert [bool(x) for x in best < one] == [False] * 4 + [True] + [False] * 3
    # the split it reports is one whose time it took (and 1 where it kept one pass)
    taken = [int(s) for s in terms["pass_split"]]
    assert [s > 1 for s in taken] == [False] * 4 + [True] + [False] * 3
    assert all(each[s][i] <= best[i] * (1 + 1e-12) for i, s in enumerate(taken))
    for i in range(len(one)):
        fastest = min(each[s][i] for s in gc.PASS_SPLITS)
        # the orientation may differ per split, so the chosen time lies within the gain of the fastest
        assert fastest <= best[i] <= fastest * (1 + gc.PASS_SPLIT_GAIN) + 1e-18


def test_a_split_reloads_the_weights_and_is_not_taken_where_the_glb_binds():
    # 2048 x 512 x 1024 on a 128x128 core (1024 accumulator rows, a two-tile operand buffer: a column block's
    # 4 weight tiles do not fit, so every pass loads them again), streaming M: passes of 1024 rows, 2 of them;
    # split 8: passes of 128 rows, 16 of them, so the 1 MiB of weights (512 x 1024 x 2 B) is read 14 more times
    for banks, width in ((1, 64), (64, 512)):
        a = chip(banks=banks, width=width).as_arrays()
        o1 = gc._orient(G, 2048, 1024, gc._chip_consts(a), np.ones(1))
        o8 = gc._orient(G, 2048, 1024, gc._chip_consts(a), np.ones(1), 8)
        assert float(o1["last_bytes"][0]) == 1024 * 128 * 2 and float(o8["last_bytes"][0]) == 128 * 128 * 2
        assert float(o8["glb"][0]) - float(o1["glb"][0]) == 14 * 512 * 1024 * 2
        one = gemm_terms(G, a, 1, pass_splits=(1,))
        # at 64 B and 512 B a cycle (one core: one link) the tiles are GLB-bound: the reloads cost more than the
        # shorter end saves
        assert one["glb_s"][0] > one["compute_s"][0]
        for s in gc.PASS_SPLITS[1:]:
            assert gemm_terms(G, a, 1, pass_splits=(s,))["latency_s"][0] > one["latency_s"][0] * (1 + gc.PASS_SPLIT_GAIN)
        assert gemm_terms(G, a, 1)["latency_s"][0] == one["latency_s"][0]
