"""Does DeepSpeed's 2021 pipeline schedule cost more than ideal 1F1B? (README, the MT-NLG rows of the second
held-out set.)

MT-NLG 530B trained with DeepSpeed's pipeline engine, whose p2p sends and receives were blocking NCCL calls
(deepspeed/runtime/pipe/p2p.py at microsoft/DeepSpeed commit 1fc74cb, Oct 2021: ``dist.send`` / ``dist.recv``,
``async_op`` refused) issued at the start of each step of its TrainSchedule (pipe/schedule.py, same commit: 2(m +
p - 1) steps, even stages run forwards on even steps and backwards on odd ones, odd stages the reverse). A
blocking pair couples the two GPUs' timelines, so the schedule might run in lock-step, each step as long as
its slower neighbour's work. This replays the schedule's instruction order per stage with rendezvous
semantics (a send and its receive both finish at the later of the two arrivals plus the transfer) and compares
the iteration with ideal 1F1B, (m + p - 1)(F + B).

    python scripts/deepspeed_schedule_check.py

Result (F = 41.7 ms, B = 125.1 ms per stage and microbatch as phaze gives MT-NLG's stages, p = 35): the replay
equals ideal 1F1B within 0.1% at m = 240 / 192 / 160, so the blocking p2p does not explain MT-NLG's 21-23%.
Analysis only; nothing here is part of the model.
"""
from __future__ import annotations


def stage_program(s: int, p: int, m: int) -> list[tuple[str, int]]:
    """Stage ``s``'s instructions (kind, microbatch) in DeepSpeed TrainSchedule order."""
    def step_to_mb(step: int) -> tuple[int, bool]:
        if step % 2 == 0 and s % 2 == 0:
            return step // 2 - s // 2, True
        if step % 2 == 1 and s % 2 == 1:
            return (step - 1) // 2 - s // 2, True
        if step % 2 == 0:
            return step // 2 - p + (s + 1) // 2, False
        return (step - 1) // 2 - p + 1 + s // 2, False

    def valid(mb: int) -> bool:
        return 0 <= mb < m

    prog, prev = [], -1
    for step in range(2 * (m + p - 1)):
        mb, fwd = step_to_mb(step)
        if fwd:
            if valid(mb) and s > 0:
                prog.append(("recv_act", mb))
            if valid(prev) and s > 0:
                prog.append(("send_grad", prev))
        else:
            if valid(prev) and s < p - 1:
                prog.append(("send_act", prev))
            if valid(mb) and s < p - 1:
                prog.append(("recv_grad", mb))
        if valid(mb):
            prog.append(("F" if fwd else "B", mb))
        prev = mb
    return prog


PARTNER = {"send_act": (1, "recv_act"), "recv_act": (-1, "send_act"),
           "send_grad": (-1, "recv_grad"), "recv_grad": (1, "send_grad")}


def replay_s(p: int, m: int, fwd_s: float, bwd_s: float, transfer_s: float) -> float:
    """Iteration time of the schedule with blocking p2p (rendezvous); raises on a deadlock."""
    progs = [stage_program(s, p, m) for s in range(p)]
    ptr, t = [0] * p, [0.0] * p
    while any(ptr[s] < len(progs[s]) for s in range(p)):
        moved = False
        for s in range(p):
            while ptr[s] < len(progs[s]):
                kind, mb = progs[s][ptr[s]]
                if kind in ("F", "B"):
                    t[s] += fwd_s if kind == "F" else bwd_s
                    ptr[s] += 1
                    moved = True
                    continue
                d, other = PARTNER[kind]
                q = s + d
                if ptr[q] < len(progs[q]) and progs[q][ptr[q]] == (other, mb):
                    t[s] = t[q] = max(t[s], t[q]) + transfer_s
                    ptr[s] += 1
                    ptr[q] += 1
                    moved = True
                    continue
                break
        if not moved:
            raise RuntimeError(f"the schedule deadlocks at {ptr}")
    return max(t)


def main() -> None:
    fwd_s, bwd_s, transfer_s, p = 0.0417, 0.1251, 0.0002, 35
    for m in (240, 192, 160):
        ds = replay_s(p, m, fwd_s, bwd_s, transfer_s)
        ideal = (m + p - 1) * (fwd_s + bwd_s + 4 * transfer_s)
        print(f"m = {m}: DeepSpeed TrainSchedule {ds:.2f} s, ideal 1F1B {ideal:.2f} s, ratio {ds / ideal:.4f}")


if __name__ == "__main__":
    main()
