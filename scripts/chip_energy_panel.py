#!/usr/bin/env python3
"""Run the chip-validation GEMM panel through ZigZag for energy; write src/phaze/validation/data/chip_energy_panel.json.

Not run by the project or its tests (``phaze validate --chip`` reads the JSON). Run it with the project's
Python, which computes phaze's energy constants of each case's chip, and ZigZag's scratch venv (see
scripts/chip_panel.py for installing it):

    .venv/bin/python scripts/chip_energy_panel.py --zigzag-python ../scratch-zz/bin/python [--jobs 2]

Each case is the latency panel's case (scripts/chip_panel.py: one tensor core with its operand buffer,
accumulator and a GLB holding the slice's operands) with the energies phaze charges on that core: the MAC
(``phaze.hardware.power.MAC_J``), a row read and a row write of the operand buffer and of the accumulator
and a GLB byte read and written (``phaze.hardware.power.energy_parts``, CACTI 7 at 22 nm). ZigZag searches
the minimum-energy mapping of the GEMM (temporal loop orders and blockings, both operand orientations) on
the same memories with the same costs, so the two differ only in what they count: which data moves how
often. The GLB is one shared port (its energy per byte does not depend on the split). The wires (NoC) and
HBM are phaze's own terms and are not in ZigZag's count (nor compared). Results are cached in --cache so an
interrupted run resumes.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "src"))

import chip_panel  # noqa: E402  (the latency panel: its cases and ZigZag driver)
from phaze.validation.chip_energy import energy_costs_pj, phaze_energy_pj  # noqa: E402  (phaze's side)

OUT = ROOT / "src/phaze/validation/data/chip_energy_panel.json"


def phaze_schedule(case: dict, stream: str, split: int = 1) -> list[list] | None:
    """phaze's one-core schedule of the case as ZigZag's temporal ordering, innermost loop first
    (``phaze.cost.gemm_chip``'s module docstring): passes of ``mb`` streamed rows (B), 1/``split`` of as many
    as the accumulator holds (``gemm_chip.PASS_SPLITS``; the energy panel's schedule is one pass), every
    weight tile (C: the K side, R rows a tile) of a column block (K: the stationary side, C columns a block) per
    pass, the column blocks, the passes -- or, when a column block's
    weight panel fits the operand buffer, its passes inside the block (the panel is loaded once). None when
    the loops do not divide (ZigZag takes whole loops only)."""
    e = case["bytes_per_element"]
    S, T = (case["m"], case["n"]) if stream == "m" else (case["n"], case["m"])
    R, C, K = case["rows"], case["cols"], case["k"]
    acc_rows = case["accumulator_bytes"] // (4 * C)
    if acc_rows < 1 or (K > R and K % R) or (T > C and T % C):
        return None
    mb = min(S, acc_rows)
    if mb % split or S % (mb // split):
        return None
    mb //= split
    kt, nt, passes = -(-K // R), -(-T // C), S // mb
    fits = kt * R * C * e <= case["operand_buffer_bytes"]
    loops = [["B", mb], ["C", kt]] + ([["B", passes], ["K", nt]] if fits else [["K", nt], ["B", passes]])
    return [x for x in loops if x[1] > 1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zigzag-python", default="../scratch-zz/bin/python")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "phaze_chip_energy_cache.json"))
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per ZigZag run")
    ap.add_argument("--only", help="run the cases whose name contains this text (a quick check)")
    ap.add_argument("--deep-lpf", type=int, default=10, help="rerun the orientation phaze's schedule streams with "
                    "ZigZag's LOMA search at this loop-prime-factor limit (ZigZag's default, 6, merges the factors "
                    "of a long loop, so it cannot split 512 rows into passes of 256; 0: never) where the default "
                    "search's mapping costs more than phaze's schedule by --deep-above percent: a deeper search "
                    "can only lower ZigZag's minimum, so it checks that phaze's schedule is one ZigZag reaches")
    ap.add_argument("--deep-above", type=float, default=2.0)
    ap.add_argument("-o", "--output", default=str(OUT))
    args = ap.parse_args()
    panel = [dict(c, energy_costs_pj=energy_costs_pj(c)) for c in chip_panel.cases()
             if not args.only or args.only in c["name"]]
    phaze = {c["name"]: phaze_energy_pj(c) for c in panel}  # (energy by part, the orientation it streams)
    phaze_stream = lambda c: phaze[c["name"]][1]  # noqa: E731
    cache_path = Path(args.cache)
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    key = lambda c, stream: f"energy|{stream}|{json.dumps(c, sort_keys=True)}"  # noqa: E731
    deep = {c["name"]: dict(c, zigzag_lpf_limit=args.deep_lpf) for c in panel} if args.deep_lpf else {}
    jobs = [(c, s) for c in panel for s in "mn" if key(c, s) not in cache or "error" in cache[key(c, s)]]

    def wants_deep(c):
        st = phaze_stream(c)
        done = cache.get(key(deep[c["name"]], st))
        if done is not None and "error" not in done:
            return False
        run = cache.get(key(c, st)) or {}
        mine = sum(phaze[c["name"]][0].values())
        return "energy_pj" in run and run["energy_pj"] > mine * (1 + args.deep_above / 100)

    sched = {}
    for c in panel:  # ZigZag on phaze's own schedule (no search): the check of phaze's counts
        order = phaze_schedule(c, phaze_stream(c))
        if order:
            sched[c["name"]] = dict(c, zigzag_temporal_ordering=order)
    jobs += [(sc, phaze_stream(sc)) for sc in sched.values()
             if key(sc, phaze_stream(sc)) not in cache or "error" in cache[key(sc, phaze_stream(sc))]]
    if deep and not jobs:  # the default runs first; the deep ones where they fall short of phaze's schedule
        jobs = [(deep[c["name"]], phaze_stream(c)) for c in panel if wants_deep(c)]
    print(f"{len(panel)} cases, {len(jobs)} ZigZag energy runs to do", flush=True)
    lock = threading.Lock()

    def one(job):
        c, stream = job
        res = chip_panel._run_tool(args.zigzag_python, "zigzag", c, stream, args.timeout, "one")
        with lock:
            cache[key(c, stream)] = res
            cache_path.write_text(json.dumps(cache))
        print(f"{stream} {c['name']}: {res.get('energy_pj', res.get('error'))}", flush=True)

    with ThreadPoolExecutor(args.jobs) as ex:
        list(ex.map(one, sorted(jobs, key=lambda j: chip_panel._work(j[0]))))
    rows, failed = [], 0
    for c in panel:
        # both orientations (M's rows streamed, or the transposed product's): phaze is compared with ZigZag in
        # the orientation its latency model chose, and with the lower of the two
        runs = {s: cache.get(key(c, s), {"error": "not run"}) for s in "mn"}
        if c["name"] in sched:
            sc = sched[c["name"]]
            runs["schedule"] = dict(cache.get(key(sc, phaze_stream(c)), {"error": "not run"}), stream=phaze_stream(c),
                                    temporal_ordering=sc["zigzag_temporal_ordering"])
        else:
            runs["schedule"] = {"error": "phaze's schedule has a loop ZigZag cannot take whole", "stream": phaze_stream(c)}
        if deep and key(deep[c["name"]], phaze_stream(c)) in cache:
            st = phaze_stream(c)
            runs["deep"] = dict(cache[key(deep[c["name"]], st)], stream=st, lpf_limit=args.deep_lpf)
        failed += any("error" in r for k, r in runs.items() if k != "schedule" or c["name"] in sched)
        rows.append(dict(c, zigzag=runs))
    chip_panel.write_zigzag_doc(args.output, "GEMM panel energies for `phaze validate --chip`: the latency panel's "
                                "cases with phaze's energy constants of each core, and ZigZag's minimum-energy mapping "
                                "under the same constants (pJ); see docs/chip-validation.md",
                                args.zigzag_python, "chip_energy_panel.py", rows)
    print(f"wrote {args.output}: {len(rows)} cases ({failed} with a failed run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
