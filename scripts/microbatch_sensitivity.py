"""What-if behind README's note on the Megatron-Core r0.8 rows of the second held-out set: their micro-batch size
is not stated, so each row is evaluated at micro-batch 1 (the shipped assumption), 2 and 4, with everything else as
packaged, and its error against the measured step printed.

    .venv/bin/python scripts/microbatch_sensitivity.py

Analysis only: the packaged runs keep micro-batch 1 (chosen before the set was evaluated).
"""
from __future__ import annotations

import dataclasses
import importlib


def rows(microbatches=(1, 2, 4)) -> list[tuple[str, list[tuple[int, float, bool]]]]:
    """(case label, [(micro-batch, error %, fits)]) for each Megatron-Core r0.8 row."""
    from phaze.validation.cases import HELD_OUT2_FILE, packaged_cases
    validate = importlib.import_module("phaze.validation.validate")
    out = []
    for c in packaged_cases(HELD_OUT2_FILE).time:
        if c.group != "Megatron-Core r0.8 H100":
            continue
        res = []
        for mbs in microbatches:
            _, ev = validate._plan_evaluation(dataclasses.replace(c, microbatch=mbs))
            res.append((mbs, 100.0 * (ev.iteration_time_s / c.measured_s - 1.0), bool(ev.fits)))
        out.append((c.label, res))
    return out


if __name__ == "__main__":
    for label, res in rows():
        print(f"{label:40s} " + "  ".join(f"mbs {m}: {e:+6.2f}% {'fits' if f else 'OOM'}" for m, e, f in res))
