#!/usr/bin/env python3
"""ZigZag's latency of phaze's own split schedules; write src/phaze/validation/data/chip_schedule_check.json.

Not run by the project or its tests (tests read the JSON). Run it with the project's Python and ZigZag's
scratch venv (see scripts/chip_panel.py for installing it):

    .venv/bin/python scripts/chip_schedule_check.py --zigzag-python ../scratch-zz/bin/python [--jobs 2]

For every latency-panel case on which phaze's template splits the accumulator's passes
(``phaze.cost.gemm_chip.PASS_SPLITS``: the case's ``pass_split`` > 1), the schedule phaze costs (its
orientation, passes of 1/split the rows the accumulator holds, the weight tiles, column blocks and passes in
the template's order: ``chip_energy_panel.phaze_schedule``) is handed to ZigZag as a fixed temporal ordering,
under each GLB port configuration the panel runs the case with (``chip_panel._distinct_splits``), and ZigZag
counts its cycles without searching. Beside ZigZag's own search minimum (the panel's reference), this says
whether a difference is in the schedule (ZigZag's mapper picks another) or in the costing of one schedule.
A case whose loops ZigZag cannot take whole is listed with ``zigzag_schedule_cycles`` null. Results are cached
in --cache so an interrupted run resumes.
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
from chip_energy_panel import phaze_schedule  # noqa: E402
from phaze.validation.chip import load_panel, phaze_cycles, phaze_schedule_choice  # noqa: E402

OUT = ROOT / "src/phaze/validation/data/chip_schedule_check.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zigzag-python", default="../scratch-zz/bin/python")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "phaze_chip_schedule_cache.json"))
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per ZigZag run")
    ap.add_argument("-o", "--output", default=str(OUT))
    args = ap.parse_args()
    stored = {c["name"]: c for c in load_panel()["cases"]}
    cases = []
    for c in chip_panel.cases():
        stream, split = phaze_schedule_choice(c)
        if split > 1:
            cases.append((c, stream, split, phaze_schedule(c, stream, split)))
    cache_path = Path(args.cache)
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    def key(c, order, stream, port):
        return f"{stream}|{port}|{json.dumps(order)}|{json.dumps(c, sort_keys=True)}"
    jobs = [(c, order, stream, port) for c, stream, _, order in cases if order
            for port in chip_panel._distinct_splits(c)
            if key(c, order, stream, port) not in cache or "error" in cache[key(c, order, stream, port)]]
    print(f"{len(cases)} cases with a pass split, {len(jobs)} ZigZag runs to do", flush=True)
    lock = threading.Lock()

    def one(job):
        c, order, stream, port = job
        res = chip_panel._run_tool(args.zigzag_python, "zigzag", dict(c, zigzag_temporal_ordering=order), stream,
                                   args.timeout, port)
        with lock:
            cache[key(*job)] = res
            cache_path.write_text(json.dumps(cache))
        print(f"{stream} {port} {c['name']}: {res.get('cycles', res.get('error'))}", flush=True)

    with ThreadPoolExecutor(args.jobs) as ex:
        list(ex.map(one, jobs))
    rows = []
    for c, stream, split, order in cases:
        runs = {port: cache.get(key(c, order, stream, port), {"error": "not run"})
                for port in chip_panel._distinct_splits(c)} if order else {}
        cycles = {port: r["cycles"] for port, r in runs.items() if "error" not in r}
        rows.append({"name": c["name"], "stream": stream, "pass_split": split, "temporal_ordering": order,
                     "phaze_cycles": phaze_cycles(c), "zigzag_search_cycles": stored[c["name"]]["zigzag"]["cycles"],
                     "zigzag_schedule_cycles_by_port": cycles,
                     "zigzag_schedule_cycles": min(cycles.values()) if cycles else None})
    chip_panel.write_zigzag_doc(args.output, "ZigZag's cycles of phaze's own split schedules (a fixed temporal "
                                "ordering, no search) beside ZigZag's search minimum; see docs/chip-validation.md",
                                args.zigzag_python, "chip_schedule_check.py", rows)
    print(f"wrote {args.output}: {len(rows)} cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
