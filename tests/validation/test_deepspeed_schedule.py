"""scripts/deepspeed_schedule_check.py: the replay of DeepSpeed's TrainSchedule with blocking p2p, on cases
small enough to check by hand, and its README claim (no slower than ideal 1F1B at MT-NLG's shape)."""
import pytest
from script_loader import load_script


@pytest.fixture(scope="module")
def ds():
    return load_script("deepspeed_schedule_check")


def test_each_stage_runs_every_microbatch_once_each_way(ds):
    for p, m in ((2, 3), (4, 8), (5, 2)):
        for s in range(p):
            prog = ds.stage_program(s, p, m)
            assert [mb for k, mb in prog if k == "F"] == list(range(m))
            assert sorted(mb for k, mb in prog if k == "B") == list(range(m))
            assert sum(k == "recv_act" for k, _ in prog) == (m if s > 0 else 0)
            assert sum(k == "send_act" for k, _ in prog) == (m if s < p - 1 else 0)


def test_two_stages_by_hand(ds):
    # p = 2, m = 1, F = 1, B = 2, no transfer time: stage 0 forward [0, 1], stage 1 forward [1, 2] and
    # backward [2, 4], stage 0 backward [4, 6]: 6 s = F + F + B + B = (m + p - 1)(F + B)
    assert ds.replay_s(2, 1, 1.0, 2.0, 0.0) == pytest.approx(6.0)
    # a transfer of 0.5 s on each of the two hops (activation, gradient) adds 1 s
    assert ds.replay_s(2, 1, 1.0, 2.0, 0.5) == pytest.approx(7.0)


@pytest.mark.parametrize("p,m", [(4, 16), (8, 24), (35, 40)])
def test_no_slower_than_ideal_1f1b(ds, p, m):
    f, b = 1.0, 3.0
    assert ds.replay_s(p, m, f, b, 0.0) == pytest.approx((m + p - 1) * (f + b), rel=1e-9)
