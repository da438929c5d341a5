"""The adversarial suite: real attacks, written as model patches, graded by the real harness.

Every attack (tests/adversarial/attacks.py; sources in tests/adversarial/payloads/) gets
its own copy of a demo instance (``harness-demo__calcly-1-attack-<slug>``: same repository,
base commit, test patch, F2P and P2P) so that the whole list runs as ONE batch through
``harness run``; a second batch re-runs it and must reach identical verdicts. No attack
may be resolved; each must leave the evidence its :class:`Expect` lists. Attacks that
work when the defences are out of the way are shown to do so on the host first
(``potent``), so that a NO here means "defended", not "the attack was broken".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.inputs.demo import DEMO_DIR, build_demo_repos
from tests.adversarial.attacks import ALL_ATTACKS, ATTACKS, EXTRA_ATTACKS, Attack, undefended_outcome, write_batch
from tests.conftest import HarnessRun, RunResult, leftover_containers
from tests.patchgen import demo_instance

# 30 s: enough for the bombs to hit their limits (and say so) on a busy 2-core machine
RUN_ARGS = ("--timeout", "30", "--max-workers", "2")
RUN_IDS = ("adversarial", "adversarial-rerun")


@dataclass
class Batch:
    run: RunResult
    seconds: float
    workdir: Path
    runner: HarnessRun


def _run_batch(runner: HarnessRun, workdir: Path, attacks: list[Attack], run_id: str) -> Batch:
    workdir.mkdir(parents=True, exist_ok=True)
    instances, predictions = write_batch(workdir, attacks)
    started = time.monotonic()
    run = runner("--instances", str(instances), "--predictions", str(predictions), *RUN_ARGS, run_id=run_id)
    return Batch(run, time.monotonic() - started, workdir, runner)


@pytest.fixture(scope="module")
def batch(tmp_path_factory, cache_dir, engine) -> Batch:
    workdir = tmp_path_factory.mktemp("adversarial")
    result = _run_batch(HarnessRun(workdir / "runs", cache_dir), workdir / "batch", ALL_ATTACKS, RUN_IDS[0])
    assert result.run.exit_code == 0
    return result


def _ours(engine, root: Path) -> list:
    """Harness containers and volumes of this module's run in ``root`` (other engineers may
    be running this same module, with the same run ids, on the same engine: the run
    directory's scope label tells them apart)."""
    def labels(obj):
        return (getattr(obj, "labels", None) or obj.attrs.get("Labels") or {})
    from harness.run.batch import run_scope
    from harness.engine.sandbox import LABEL_RUN_DIR
    return [o for o in leftover_containers(engine, *RUN_IDS) if labels(o).get(LABEL_RUN_DIR) == run_scope(root)]


def _describe(report: dict) -> str:
    integrity = report["integrity"]
    return (f"status={report['status']} reason={report['error_reason']} flags={integrity['flags']} "
            f"canaries={integrity.get('canaries')} exit={report['test_exit_code']} "
            f"f2p_success={report['tests_status']['FAIL_TO_PASS']['success']} "
            f"detail={(report['error_detail'] or '')[:300]!r}")


def _check(batch: Batch, attack: Attack) -> None:
    report = batch.run.report(attack.instance_id)
    why = f"{attack.instance_id} ({attack.what}): {_describe(report)}"
    assert report["resolved"] is False, why
    assert report["status"] != "FULL", why
    # Without the fix no F2P test can honestly pass (the rejected patches carry the fix,
    # but never run). An INVALID report may still list what the forged results claimed.
    if report["status"] != "INVALID":
        assert report["tests_status"]["FAIL_TO_PASS"]["success"] == [], why
    expect = attack.expect
    if expect.outcomes is not None:
        assert (report["status"], report["error_reason"]) in expect.outcomes, why
    for flag in expect.flags:
        assert flag in report["integrity"]["flags"], why
    output_file = batch.run.root / attack.instance_id / "test_output.txt"
    output = output_file.read_text(errors="replace") if output_file.exists() else ""
    for text in expect.evidence:
        assert text in output, f"the attack did not leave {text!r} in the test output: {why}"
    for text in expect.absent:
        assert text not in output, f"{text!r} in the test output: {why}"


# --------------------------------------------------------------------------- potency

@pytest.mark.parametrize("attack", [a for a in ALL_ATTACKS if a.potent], ids=lambda a: a.slug)
def test_attack_works_when_the_defences_are_out_of_the_way(attack, tmp_path, cache_dir):
    """On the host, without the harness: a clone of the source repository at the base
    commit, the attack's patch + the test patch, no restore, `python -m pytest -rA
    --junitxml` from the root. Every F2P test comes out PASSED in the JUnit report (the
    one the harness grades by), so the attack is real."""
    repos = build_demo_repos(DEMO_DIR, cache_dir / "demo-repos")
    outcome = undefended_outcome(attack, tmp_path, next(iter(repos.values())).parent)
    f2p = demo_instance(attack.base)["FAIL_TO_PASS"]
    assert {t: outcome.statuses.get(t) for t in f2p} == {t: "PASSED" for t in f2p}, outcome.output[-3000:]


# --------------------------------------------------------------------------- the batch

@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: f"{a.number}-{a.slug}")
def test_attack_is_not_resolved(batch, attack):
    _check(batch, attack)


def test_batch_is_complete_and_leaves_nothing_behind(batch, engine):
    summary = batch.run.summary
    ids = sorted(a.instance_id for a in ALL_ATTACKS)
    assert summary["submitted_ids"] == ids
    assert summary["total_instances"] == len(ids)
    assert sorted(p.parent.name for p in batch.run.root.glob("*/report.json")) == ids
    # (the extra attacks' verdicts are checked at the end of the file)
    assert set(summary["resolved_ids"]).isdisjoint(a.instance_id for a in ATTACKS), summary["resolved_ids"]
    assert summary["error_ids"] == [], summary["error_reasons"]  # nothing blamed on harness/instance
    assert _ours(engine, batch.run.root) == []
    print(f"\nadversarial batch: {len(ids)} attacks in {batch.seconds:.1f} s")
    for attack in ALL_ATTACKS:
        print(f"  {attack.number:>3} {attack.slug:28} {_describe(batch.run.report(attack.instance_id))[:160]}")


def test_rerun_reaches_identical_verdicts(batch, engine):
    """The same batch again (a new run id, so nothing is reused): the same (status,
    error_reason) for every attack."""
    again = _run_batch(batch.runner, batch.workdir / "rerun", ALL_ATTACKS, RUN_IDS[1])
    first, second = batch.run.statuses(), again.run.statuses()
    assert sorted(second) == sorted(a.instance_id for a in ALL_ATTACKS)
    differ = {i: (first.get(i), second[i]) for i in second if first.get(i) != second[i]}
    assert differ == {}
    assert _ours(engine, again.run.root) == []
    print(f"\nadversarial re-run: {len(second)} attacks in {again.seconds:.1f} s")


def test_gold_control_is_still_full_everywhere(tmp_path, cache_dir, engine):
    runner = HarnessRun(tmp_path / "runs", cache_dir)
    run = runner("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", "gold",
                 "--max-workers", "2", run_id="adversarial-gold")
    statuses = run.statuses()
    assert statuses and set(statuses.values()) == {("FULL", None)}, statuses
    assert run.summary["resolved_instances"] == run.summary["total_instances"] == len(statuses)


# --------------------------------------------------------------------------- beyond the brief
# Last in the file on purpose: with -x, a failure here does not hide the rest.

@pytest.mark.parametrize("attack", EXTRA_ATTACKS, ids=lambda a: f"{a.number}-{a.slug}")
def test_extra_attack_is_not_resolved(batch, attack):
    _check(batch, attack)
