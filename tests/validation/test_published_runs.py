"""The 23 published runs (SC21 Table 1 on A100, NeMo on H100) and the two held-out sets: packaged with their
sources, every plan of the 23 fits, the time error per group stays within the bounds achieved today, and the
issue's goals (23 runs: 5% mean / 10% max; held-out: 6% / 12%) are asserted -- as strict xfails where they are
NOT met (docs/validation.md has the figures; the goals are src/phaze/validation/data/goals.json)."""
import json
from importlib import resources

import pytest

from phaze.validation import validate
from phaze.validation.cases import RUNS_FILE, packaged_cases
from phaze.validation.goals import goal

# |error| bounds actually achieved per group (mean, max), to catch regressions; the goal is 5% / 10%.
ACHIEVED = {"SC21-T1": (3.6, 6.2), "NeMo": (1.4, 2.8)}
RUNS = goal("published_runs")  # mean, max |error| % over the 23 runs (src/phaze/validation/data/goals.json)
HELD_OUT = goal("held_out")  # on published runs the model was not built on
RUNS_GOAL = (RUNS.mean_abs_pct, RUNS.max_abs_pct)
HELD_OUT_GOAL = (HELD_OUT.mean_abs_pct, HELD_OUT.max_abs_pct)


@pytest.fixture(scope="module")
def report():
    return validate(packaged_cases(RUNS_FILE))


def test_runs_are_packaged_with_sources():
    data = json.loads(resources.files("phaze.validation").joinpath("data", RUNS_FILE).read_text())
    assert len(data["runs"]) == 23
    for r in data["runs"]:
        assert r["source"] and r["measured_iteration_time_s"] > 0 and r["assumptions"]
    cases = packaged_cases(RUNS_FILE)
    nemo = [c for c in cases.time if c.group == "NeMo"]
    assert len(nemo) == 13 and all(c.attention == "flash" and c.tp_overlap and c.dp_overlap and c.zero1 for c in nemo)
    sc21 = [c for c in cases.time if c.group == "SC21-T1"]
    assert len(sc21) == 10 and not any(c.zero1 or c.attention == "flash" for c in sc21)
    # run_table_1.sh: DDP=torch (gradient all-reduce overlapped with the backward) for 1.7B-18B, DDP=local after
    assert [c.dp_overlap for c in sc21] == [True] * 4 + [False] * 6


def test_every_published_run_fits(report):
    """They all trained on 80 GB GPUs: a plan the memory model rejects is a false negative."""
    assert all(r.fits for r in report.time), [(r.case, r.memory_gib) for r in report.time if not r.fits]
    assert all(r.memory_gib <= r.capacity_gib for r in report.time)


def test_time_error_per_group_within_achieved_bounds(report):
    groups = {g.group: g for g in report.groups}
    assert set(groups) == set(ACHIEVED)
    for name, (mean, mx) in ACHIEVED.items():
        g = groups[name]
        assert g.time_mean_abs_pct <= mean and g.time_max_abs_pct <= mx, g
        errs = [abs(r.error_pct) for r in report.time if r.group == name]
        assert g.time_mean_abs_pct == pytest.approx(sum(errs) / len(errs))


def test_goal_on_the_23_runs(report):
    """Met: 2.26% mean / 6.10% max (SC21 3.51 / 6.10, NeMo 1.31 / 2.71) with the H100 GEMM efficiency set from an
    H100 measurement (0.670: Transformer Engine's getting-started layer, tests/cost/test_gpu_published.py; the
    H200 NVL's 0.746 before) and each NeMo run on the bf16 gradients its configuration sets. With the gradients
    alone it was NOT met, 6.13% / 10.56% (every NeMo run 5-11% too fast: GPT-3 175B -9.1..-10.6%, Nemotron-4
    15B -5.3..-9.0%). Before both it was met at 4.19% mean / 7.31% max (SC21 3.50 / 6.10, NeMo 4.73 / 7.31),
    charging those runs an fp32 gradient buffer they did not have, with each run's userbuffers
    configuration (the Nemotron-4 15B runs on TE's defaults, 16 SMs per pipelined / bulk overlap: -3.9..-7.3%,
    were -5.7..-9.0% on NeMo's GPT-3 175B configuration); 4.80 / 9.01 before that (4.81 before the HBM-share
    scaling of the transfer interference), since the overlapped gradient
    sync is charged the compute it takes from the GPU (phaze.cost.overlap.nccl_interference); 5.70 / 10.70
    before that (Nemotron-4 15B 7-11% too fast)."""
    assert report.time_mean_abs_pct <= RUNS_GOAL[0] and report.time_max_abs_pct <= RUNS_GOAL[1]


def test_held_out_runs_are_separate_and_reported():
    """The held-out runs (Llama 3.1 on H100, BF16 and FP8, context parallelism) are never in the default set
    the model is checked against; their figures are reported as they come (README), here only that they
    evaluate and that the bounds achieved today hold (the goal, 6% / 12%: test below)."""
    from phaze.validation.cases import HELD_OUT_FILE, load_cases
    held = packaged_cases(HELD_OUT_FILE)
    assert len(held.time) == 34 and all(c.cp == 2 for c in held.time)
    assert not {c.label for c in held.time} & {c.label for c in load_cases().time}
    rep = validate("held-out")
    groups = {g.group: g for g in rep.groups}
    assert set(groups) == {"dgxc Llama 3.1 BF16", "dgxc Llama 3.1 FP8"}
    assert groups["dgxc Llama 3.1 BF16"].time_mean_abs_pct <= HELD_OUT_ACHIEVED[0]
    assert rep.time_max_abs_pct <= HELD_OUT_ACHIEVED[1]


def test_every_first_held_out_run_fits():
    """They trained on 80 GB GPUs. With the bf16 gradients their configurations set, all 34 fit (3 did not when
    they were charged fp32 gradients: Llama 3.1 8B on 8 GPUs, BF16 75.1 GiB and FP8 71.9 GiB, and 405B BF16 on
    576 GPUs, 75.0 GiB, against 71.5 usable)."""
    rep = validate("held-out")
    assert all(r.fits for r in rep.time), [(r.case, r.memory_gib) for r in rep.time if not r.fits]


def test_goal_on_the_first_held_out_set():
    """Met: 2.99% mean / 8.37% max (BF16 1.88 / 4.04, FP8 4.09 / 8.37), all 34 fit, with the H100 FP8 rate from the
    H100 tutorial's FP8 run (1.845x BF16; 3.01 / 9.91 at the H200 NVL's 1.905x), the H100 GEMM efficiency
    from an H100 measurement and the bf16 gradients of their dgxc-benchmarking configurations (llama3.1_*.yaml
    optim.grad_sync_dtype: bf16); with the gradients alone NOT met, 6.97% / 14.79%. Met before both (3.77% mean
    / 10.54% max, charging fp32 gradients, 31 of 34 fit) with each run's userbuffers configuration (dgxc-benchmarking's Llama 3.1
    70B / 405B ub_tp_comm_overlap_cfg; 70B runs +0.1 point, 405B -0.6..-0.8); 3.75 / 10.62 before that, with
    NCCL's kernels charged beside the overlapped DP sync and the CP ring
    (phaze.cost.overlap.nccl_interference); 4.09 / 10.97 with only the transfer interference of overlapped NVLink
    collectives, 5.01 / 12.40 before that, 4.61 / 9.06 before the DP-sync pass."""
    rep = validate("held-out")
    assert rep.time_mean_abs_pct <= HELD_OUT_GOAL[0] and rep.time_max_abs_pct <= HELD_OUT_GOAL[1]


HELD_OUT_ACHIEVED = (1.9, 8.4)  # BF16 group mean, overall max |error| % today


@pytest.fixture(scope="module")
def held_out_2():
    return validate("held-out-2")


def test_second_held_out_set_is_packaged_with_sources():
    """19 runs collected before the second accuracy pass, each with its source and its conversion, none in the
    default set or the first held-out set."""
    from phaze.validation.cases import HELD_OUT2_FILE, HELD_OUT_FILE, load_cases
    data = json.loads(resources.files("phaze.validation").joinpath("data", HELD_OUT2_FILE).read_text())
    assert "before" in data["about"] and len(data["runs"]) == 19
    for r in data["runs"]:
        assert r["source"] and r["conversion"] and r["assumptions"] and r["measured_iteration_time_s"] > 0
    labels = {c.label for c in packaged_cases(HELD_OUT2_FILE).time}
    assert not labels & ({c.label for c in load_cases().time} | {c.label for c in packaged_cases(HELD_OUT_FILE).time})


def test_second_held_out_set_within_the_figures_reported(held_out_2):
    """First evaluated at 15.22% mean, 61.19% max, 16 of 19 fit (docs/changes.md, as first evaluated); after the DP-sync
    changes this set motivated (no longer out-of-sample): 13.51% / 24.90%; 13.42 / 24.90 with the TP-overlap
    correction (the last reduce-scatter chunk exposed); 13.28 / 24.02 with the A100 LayerNorm kernels at their
    measured bandwidth; 12.74 / 24.81 with the transfer interference of overlapped NVLink collectives (Megatron-LM
    32B, already predicted too slow, moved from +21.9% to +24.8%); 12.61 / 24.81 with Megatron's attention kernels
    on A100 at their measured bandwidth (MT-NLG); 11.79 / 29.23 with NCCL's kernels charged beside the overlapped
    DP sync (Megatron-LM 32B, too slow, +24.8% -> +29.2%; the NeMo FP8 and the other Megatron-LM runs closer);
    11.68 / 30.87 with each run's userbuffers configuration (the Megatron-LM runs pass no --tp-comm-overlap-cfg,
    so TE's defaults: 7.1B -14.1% -> -12.3%, 16B +1.2% -> +2.8%, 32B +29.2% -> +30.9%; the NeMo 24.07 runs the
    configuration their NeMo-Framework-Launcher 24.07 model file loads: GPT-3 20B -9.9 -> -8.9%, Nemotron 8B
    -16.2 -> -15.0%, 22B -5.2 -> -4.0%); 12.06 / 30.87 with the Nemotron-340B run's bf16 gradients (its launcher
    config sets optim.grad_sync_dtype: bf16: +0.43% -> -7.69%, 85.1 -> 74.3 GiB, still no fit); 14.39 / 30.87, 18 of
    19 fit, with the GPT-3 and Llama runs' bf16 gradients too (the launcher's H100 FP8 example scripts set
    grad_sync_dtype=bf16: GPT-3 5B -21.1 -> -23.3%, 20B -8.9 -> -16.1% and now fits, Llama 3 8B -12.0 -> -15.3% and
    now fits); 10.96 / 35.70 with the H100 GEMM efficiency from an H100 measurement (0.670, not 0.75): every H100
    run 6-9% slower, the NeMo 24.07 group 11.98 -> 6.64% mean, Megatron-LM 32B +30.9 -> +35.7% (its micro-batch
    size is not stated; README); 10.98 / 35.70 and all 19 fit with Adam's state as each configuration sets it up
    (the Nemotron-340B launcher config also sets optim.dtype: bf16: 73.1 -> 57.0 GiB, -2.41 -> -2.77%); 10.11 /
    35.70 with the H100 FP8 rate from the H100 tutorial's FP8 run (1.845x BF16, not the H200 NVL's 1.905x): the
    NeMo 24.07 FP8 group 6.67 / 17.27 -> 5.29 / 15.55; 10.16 / 35.70 with the NeMo 24.07 table as last published on
    NeMo's main branch (8e3d65dc), not a side branch's copy of its first version (070a0bb): the group 5.29 / 15.55 ->
    5.37 / 12.23. These bounds only catch regressions; every run trained, so every run must fit."""
    groups = {g.group: g for g in held_out_2.groups}
    assert set(groups) == {"NeMo 24.07 FP8", "Megatron-Core r0.8 H100", "MT-NLG 530B A100"}
    assert held_out_2.time_mean_abs_pct <= 10.2 and held_out_2.time_max_abs_pct <= 35.8
    # the figures README's trust table quotes (an improvement must update it too)
    assert (round(held_out_2.time_mean_abs_pct, 2), round(held_out_2.time_max_abs_pct, 2)) == (10.16, 35.70)
    assert all(r.fits for r in held_out_2.time)


@pytest.mark.xfail(strict=True, reason="NOT met: second held-out set 10.16% mean / 35.70% max after the changes "
                                      "since its first evaluation (NeMo 24.07 FP8 5.37 / 12.23, Megatron-Core H100 "
                                      "16.05 / 35.70, MT-NLG A100 21.45 / 23.24); first evaluated 15.22 / 61.19; "
                                      f"goal {HELD_OUT.text()} ({HELD_OUT.source})")
def test_goal_on_the_second_held_out_set(held_out_2):
    assert held_out_2.time_mean_abs_pct <= HELD_OUT_GOAL[0] and held_out_2.time_max_abs_pct <= HELD_OUT_GOAL[1]
