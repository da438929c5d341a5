"""The background removal of finished sandboxes (harness/engine/reaper.py): bounded, drained,
and never losing a removal to an error."""

from __future__ import annotations

import threading

from harness.engine.reaper import Reaper


def test_every_handed_over_removal_runs_and_drain_waits_for_them():
    reaper = Reaper(max_pending=4)
    removed: list[int] = []
    gate = threading.Event()

    def close(n: int):
        def run() -> None:
            gate.wait(10)
            removed.append(n)
        return run

    for n in range(3):
        reaper.submit(close(n))
    assert reaper.pending() == 3 and removed == []     # handed over, not yet done
    assert reaper.drain(timeout=0.2) is False          # still waiting: drain says so
    gate.set()
    assert reaper.drain(timeout=10) is True
    assert sorted(removed) == [0, 1, 2] and reaper.pending() == 0


def test_a_hand_off_blocks_while_the_pending_removals_are_at_the_bound():
    reaper = Reaper(max_pending=2)
    gate = threading.Event()
    for _ in range(2):
        reaper.submit(lambda: gate.wait(10))
    third_done = threading.Event()
    third = threading.Thread(target=lambda: (reaper.submit(lambda: None), third_done.set()))
    third.start()
    assert not third_done.wait(0.3)        # the third hand-off waits for a free slot
    gate.set()
    assert third_done.wait(10)
    third.join(10)
    assert reaper.drain(timeout=10)


def test_a_failing_removal_frees_its_slot_and_the_others_still_run():
    reaper = Reaper(max_pending=1)
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("engine hiccup")

    reaper.submit(broken)
    reaper.submit(lambda: ran.append("next"))   # would block forever if the failed one kept its slot
    assert reaper.drain(timeout=10)
    assert ran == ["next"]
