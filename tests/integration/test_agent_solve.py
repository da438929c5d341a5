"""`harness solve` end to end: mini-swe-agent 1.15.0, pinned in its own virtualenv, driven
through its pinned litellm against a model server on 127.0.0.1 (tests/fixtures/model_server.py:
the OpenAI chat completions API, scripted replies, real token counts that litellm prices), in
real working sandboxes on the real engine, on the demo set; then graded.

* the live path gives a FULL and a NO after --grade, and the records say what happened;
* a planted API key (OPENAI_API_KEY and MSWEA_MODEL_API_KEY) reaches the model server and
  appears in no file of the run directory, in no output, and never in the sandbox;
* each budget (steps, cost, wall time, run cost) trips and is the attempt's exit status;
* a live run's recording replays to the same submissions with every observation agreeing;
  an instance without a trajectory and a trajectory without an instance are named;
* --attempts 3 gives pass@k, pass^k, cost per resolved instance and step percentiles.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.agents.pins import ensure_environment, parse_pin
from tests.agent_live import (CALCLY_1, CALCLY_2, CALL_COST, DEMO, INVENTORY_1, KEY, MODEL, RECORDS, TEXTKIT_1,
                              WRONG_SLUG, marker, three_attempt_scripts, with_key, write_config)
from tests.fixtures.model_server import (COMPLETION_TOKENS, PROMPT_TOKENS, SUBMIT, apply_patch_reply, bash_reply,
                                         scripted_model)
from tests.fixtures.services import harness_cli

pytestmark = [pytest.mark.engine]

#: what the sandbox sees of the keys: nothing (deterministic output, so replays agree)
NO_KEY_IN_SANDBOX = bash_reply('env | grep -c "sk-planted"; echo "${OPENAI_API_KEY:-unset} '
                               '${MSWEA_MODEL_API_KEY:-unset}"', "Looking at the environment.")


def live_scripts() -> dict:
    return {marker(CALCLY_1): [bash_reply("ls && python --version"), apply_patch_reply(RECORDS[CALCLY_1]["patch"]),
                               SUBMIT],
            marker(TEXTKIT_1): [WRONG_SLUG, SUBMIT],
            marker(INVENTORY_1): [NO_KEY_IN_SANDBOX, SUBMIT]}


@pytest.fixture
def planted_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("MSWEA_MODEL_API_KEY", KEY)


@pytest.fixture(scope="module")
def scaffold_environment(cache_dir):
    return ensure_environment(parse_pin(), cache_dir)


def files_holding(root: Path, secret: str) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes())


def agent(run: Path, instance_id: str, attempt: int | None = None) -> dict:
    base = run / instance_id if attempt is None else run / instance_id / f"attempt-{attempt}"
    return json.loads((base / "agent.json").read_text())


def predictions(run: Path) -> dict:
    return {(p["instance_id"], p.get("attempt")): p
            for p in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}


@pytest.fixture(scope="module")
def live(scaffold_environment, cache_dir, tmp_path_factory):
    """One live run of the demo set (graded), as a user runs it: the CLI in a subprocess."""
    out = tmp_path_factory.mktemp("solve-live")
    with scripted_model(live_scripts()) as server:
        config = write_config(out / "config.yaml", scaffold_environment, server.url)
        proc = harness_cli("solve", "--instances", str(DEMO), "--model", MODEL, "--config", str(config),
                           "--step-limit", "4", "--grade", "--run-id", "live", "--output-dir", str(out),
                           "--cache-dir", str(cache_dir), "--max-workers", "2", env=with_key())
    return out, proc, server


def test_the_live_path_solves_one_and_fails_one_and_records_what_happened(live):
    out, proc, server = live
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = out / "live"
    reports = {iid: json.loads((run / iid / "report.json").read_text()) for iid in RECORDS}
    assert reports[CALCLY_1]["status"] == "FULL" and reports[CALCLY_1]["resolved"]
    assert reports[TEXTKIT_1]["status"] == "NO" and not reports[TEXTKIT_1]["resolved"]

    solved = agent(run, CALCLY_1)
    assert solved["exit_status"] == "Submitted" and solved["limit"] is None and solved["steps"] == 3
    assert solved["usage"] == {"cost": pytest.approx(3 * CALL_COST), "calls": 3, "tokens_in": 3 * PROMPT_TOKENS,
                               "tokens_out": 3 * COMPLETION_TOKENS}
    assert solved["scaffold"]["name"] == "mini-swe-agent" and solved["scaffold"]["version"] == "1.15.0"
    assert solved["model"]["name"] == MODEL and solved["given"] == {"problem_statement": True, "hints": False,
                                                                     "reference_files": False}
    assert solved["prediction"]["files"] == ["calcly/stats.py"] and solved["submission_equals_prediction"] is True
    assert solved["image"]["tag"] == reports[CALCLY_1]["image"]["tag"]     # the same instance image as grading's
    assert [t["step"] for t in solved["step_timings"]] == [1, 2, 3]
    assert "Python 3" in (run / CALCLY_1 / f"{CALCLY_1}.traj.json").read_text()   # the environment's python
    # the unscripted instance ran into the step limit: recorded, its (empty) diff graded
    limited = agent(run, CALCLY_2)
    assert (limited["exit_status"], limited["limit"], limited["steps"]) == ("LimitsExceeded", "steps", 4)
    assert reports[CALCLY_2]["resolved"] is False

    lines = predictions(run)
    assert set(lines) == {(iid, None) for iid in RECORDS}
    line = lines[(CALCLY_1, None)]
    assert line["model_name_or_path"] == f"mini-swe-agent-1.15.0__{MODEL}"
    assert line["model_patch"] == (run / CALCLY_1 / "agent_patch.diff").read_text() == \
        (run / CALCLY_1 / "patch.diff").read_text()           # graded exactly as the tree gave it
    assert (line["steps"], line["calls"], line["exit_status"]) == (3, 3, "Submitted")
    assert line["cost"] == pytest.approx(3 * CALL_COST) and line["agent_seconds"] > 0
    assert reports[CALCLY_1]["steps"] == 3 and reports[CALCLY_1]["exit_status"] == "Submitted"

    solve = json.loads((run / "solve.json").read_text())
    pin = solve["scaffold"]["pins"]["mini-swe-agent==1.15.0"]
    assert pin["packages"]["litellm"] == "1.80.0" and pin["packages"]["mini-swe-agent"] == "1.15.0"
    assert solve["scaffold"]["config"]["agent"]["step_limit"] == 4 and solve["budgets"]["step_limit"] == 4
    assert solve["totals"]["calls"] == 3 + 4 + 2 + 2 and solve["totals"]["exit_statuses"] == {
        "LimitsExceeded": 1, "Submitted": 3}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resolved_ids"] == [CALCLY_1]


def test_a_planted_api_key_reaches_the_model_and_nothing_else(live):
    out, proc, server = live
    run = out / "live"
    assert server.requests and all(r["headers"].get("Authorization") == f"Bearer {KEY}" for r in server.requests)
    # the conversation (observations included) never held it: the sandbox had no key to print
    assert not [r for r in server.requests if KEY in json.dumps(r["body"])]
    sandbox_said = json.loads((run / INVENTORY_1 / f"{INVENTORY_1}.traj.json").read_text())["messages"][3]
    assert "unset unset" in sandbox_said["content"] and "<output>\n0\n" in sandbox_said["content"]
    assert files_holding(run, KEY) == [] and KEY not in proc.stdout + proc.stderr
    # mini-swe-agent copied MSWEA_MODEL_API_KEY into the model's config, which its trajectory records
    trajectory = json.loads((run / CALCLY_1 / f"{CALCLY_1}.traj.json").read_text())
    assert trajectory["trajectory_format"] == "mini-swe-agent-1"
    assert trajectory["info"]["config"]["model"]["model_kwargs"]["api_key"].startswith("[REDACTED")
    assert "OPENAI_API_KEY" in json.loads((run / "solve.json").read_text())["secrets_redacted"]


def test_a_live_recording_replays_to_the_same_submissions_and_gaps_are_named(live, cache_dir, tmp_path):
    out, _, _ = live
    source = tmp_path / "trajs"
    source.mkdir()
    for iid in (CALCLY_1, CALCLY_2, TEXTKIT_1):            # INVENTORY_1 left out: named, not replayed
        shutil.copy(out / "live" / iid / f"{iid}.traj.json", source / f"{iid}.traj.json")
    orphan = json.loads((source / f"{TEXTKIT_1}.traj.json").read_text())
    orphan["instance_id"] = "harness-demo__nowhere-1"
    (source / "harness-demo__nowhere-1.traj.json").write_text(json.dumps(orphan))
    proc = harness_cli("solve", "--instances", str(DEMO), "--replay", str(source), "--run-id", "replay",
                       "--output-dir", str(tmp_path / "runs"), "--cache-dir", str(cache_dir), "--max-workers", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"no trajectory for {INVENTORY_1}" in proc.stderr and "harness-demo__nowhere-1" in proc.stderr
    run = tmp_path / "runs" / "replay"
    for iid in (CALCLY_1, CALCLY_2, TEXTKIT_1):
        replay = json.loads((run / iid / "replay.json").read_text())
        assert replay["same_submission"] is True, (iid, replay)
        assert replay["observation_agreement"] == 1.0 and replay["first_divergent_step"] is None, (iid, replay)
        record = agent(run, iid)
        assert record["mode"] == "replay" and record["exit_status"] == agent(out / "live", iid)["exit_status"]
        assert record["usage"]["cost"] == pytest.approx(agent(out / "live", iid)["usage"]["cost"])
    solve = json.loads((run / "solve.json").read_text())
    assert solve["instances"]["without_trajectory"] == [INVENTORY_1]
    assert solve["instances"]["trajectories_without_instance"] == ["harness-demo__nowhere-1"]
    assert set(predictions(run)) == {(CALCLY_1, None), (CALCLY_2, None), (TEXTKIT_1, None)}
    # a run directory made here is a replay directory as it is (<id>/<id>.traj.json)
    again = harness_cli("solve", "--instances", str(DEMO), "--instance-ids", CALCLY_1, "--replay", str(out / "live"),
                        "--run-id", "replay-dir", "--output-dir", str(tmp_path / "runs"), "--cache-dir",
                        str(cache_dir))
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((tmp_path / "runs" / "replay-dir" / CALCLY_1 / "replay.json").read_text())["same_submission"]


@pytest.mark.parametrize("limit, options, exit_status, steps", [
    ("steps", {"step_limit": 2}, "LimitsExceeded", 2),
    ("cost", {"cost_limit": 2.5 * CALL_COST}, "LimitsExceeded", 3),   # checked before a call, as the scaffold does
    ("wall_time", {"wall_seconds_limit": 15.0}, "WallTimeExceeded", None),
    ("run_cost", {"run_cost_limit": 2.5 * CALL_COST}, "RunCostLimitExceeded", 3),
])
def test_each_budget_trips_and_is_the_attempts_exit_status(limit, options, exit_status, steps, scaffold_environment,
                                                           cache_dir, tmp_path, planted_key):
    import harness
    ids = [CALCLY_1, TEXTKIT_1] if limit == "run_cost" else [CALCLY_1]
    # no script: the model says "echo no-script" for ever; the server answers slowly for the wall-time case
    with scripted_model({}, delay=1.0 if limit == "wall_time" else 0.0) as server:
        config = write_config(tmp_path / "config.yaml", scaffold_environment, server.url)
        result = harness.solve(DEMO, model=MODEL, config=config, budgets=harness.Budgets(**options),
                               instance_ids=ids, run_id=f"limit-{limit}", output_dir=tmp_path / "runs",
                               cache_dir=cache_dir, quiet=True)
    run = result.run_dir
    first = agent(run, CALCLY_1)
    assert (first["exit_status"], first["limit"]) == (exit_status, limit)
    assert steps is None or first["steps"] == steps
    assert predictions(run)[(CALCLY_1, None)]["exit_status"] == exit_status
    assert result.solve["totals"]["limits"][limit] >= 1
    if limit == "run_cost":   # the next attempt did not start: the run's money was spent
        second = agent(run, TEXTKIT_1)
        assert (second["exit_status"], second["limit"], second["steps"]) == ("RunCostLimitExceeded", "run_cost", 0)
        assert result.solve["totals"]["cost"] >= options["run_cost_limit"]
    if limit == "wall_time":
        assert first["wall_seconds"] >= 15.0


def test_three_attempts_give_pass_at_k_pass_hat_k_cost_per_resolved_and_step_percentiles(scaffold_environment,
                                                                                         cache_dir, tmp_path,
                                                                                         planted_key):
    import harness
    with scripted_model(three_attempt_scripts()) as server:     # calcly-1: 2 of 3 attempts solve it
        config = write_config(tmp_path / "config.yaml", scaffold_environment, server.url)
        result = harness.solve(DEMO, model=MODEL, config=config, attempts=3, budgets=harness.Budgets(step_limit=2),
                               run_id="three", output_dir=tmp_path / "runs", cache_dir=cache_dir, max_workers=1,
                               grade=True, quiet=True)
    run = result.run_dir
    assert {agent(run, CALCLY_1, n)["exit_status"] for n in (1, 2, 3)} == {"Submitted"}
    assert len(predictions(run)) == 12
    graded = result.graded.summary
    assert sorted(graded["resolved_ids"]) == [CALCLY_1]
    metrics = graded["agent"]
    assert metrics["attempts_per_instance"] == 3
    assert metrics["pass_at_k"]["1"] == pytest.approx(2 / 3 / 4)     # calcly-1: 2 of 3; the other three: 0
    assert metrics["pass_at_k"]["3"] == pytest.approx(1 / 4)
    assert metrics["pass_hat_k"]["3"] == pytest.approx(0.0)
    assert metrics["cost"]["per_resolved_instance"] == pytest.approx(result.solve["totals"]["cost"])
    assert metrics["steps"]["p95"] is not None and metrics["steps"]["count"] == 12
    assert "| 3 |" in (run / "report.md").read_text() and "pass@3" in (run / "report.md").read_text()


#: an agent that forges every outcome with a conftest.py, then commits it so that its own submission is empty
FORGING_AGENT = bash_reply("cat > tests/conftest.py <<'EOF'\n"
                           "import pytest\n\n\n"
                           "@pytest.hookimpl(hookwrapper=True)\n"
                           "def pytest_runtest_makereport(item, call):\n"
                           "    outcome = yield\n"
                           "    outcome.get_result().outcome = 'passed'\n"
                           "EOF\n"
                           "git add -A && git -c user.name=agent -c user.email=agent@example.org commit -qm forge "
                           "&& echo committed", "Making every test pass.")


def test_an_agents_patch_is_graded_as_any_hostile_prediction_in_a_fresh_sandbox(scaffold_environment, cache_dir,
                                                                                tmp_path, planted_key):
    """What the agent did to its sandbox reaches grading only as the tree's patch: its commit hides
    nothing (tree truth, not its git), and the conftest.py it wrote meets grading's defences in a
    fresh sandbox with the pristine tests: restored, flagged, not resolved."""
    import harness
    with scripted_model({marker(CALCLY_2): [FORGING_AGENT, SUBMIT]}) as server:
        config = write_config(tmp_path / "config.yaml", scaffold_environment, server.url)
        result = harness.solve(DEMO, model=MODEL, config=config, instance_ids=[CALCLY_2], run_id="forging",
                               output_dir=tmp_path / "runs", cache_dir=cache_dir, grade=True, quiet=True)
    run = result.run_dir
    record = agent(run, CALCLY_2)
    assert record["exit_status"] == "Submitted" and record["prediction"]["files"] == ["tests/conftest.py"]
    assert (run / CALCLY_2 / "submission.diff").read_text().strip() == ""   # its own git shows nothing
    assert record["submission_equals_prediction"] is False
    assert "tests/conftest.py" in (run / CALCLY_2 / "patch.diff").read_text()   # graded: the tree's patch
    report = json.loads((run / CALCLY_2 / "report.json").read_text())
    assert report["resolved"] is False and report["status"] != "FULL"
    assert "patch_touched_test_infra" in report["integrity"]["flags"]


@pytest.mark.cluster
def test_the_ray_executor_runs_attempts_and_shares_the_runs_cost_ledger(scaffold_environment, cache_dir, tmp_path):
    """--executor ray without an address: a one-node Ray cluster on this machine for the run.
    The first attempt submits; the run's cost ledger (a Ray actor) then stops the second one."""
    scripts = {marker(CALCLY_1): [bash_reply("ls"), apply_patch_reply(RECORDS[CALCLY_1]["patch"]), SUBMIT]}
    env = {k: v for k, v in with_key().items() if not k.startswith("RAY_")}
    with scripted_model(scripts) as server:
        config = write_config(tmp_path / "config.yaml", scaffold_environment, server.url)
        proc = harness_cli("solve", "--executor", "ray", "--instances", str(DEMO), "--instance-ids", CALCLY_1,
                           TEXTKIT_1, "--model", MODEL, "--config", str(config), "--run-cost-limit",
                           str(3.5 * CALL_COST), "--run-id", "ray", "--output-dir", str(tmp_path / "runs"),
                           "--cache-dir", str(cache_dir), "--max-workers", "1", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "runs" / "ray"
    solved, stopped = agent(run, CALCLY_1), agent(run, TEXTKIT_1)
    assert (solved["exit_status"], solved["steps"], solved["prediction"]["files"]) == (
        "Submitted", 3, ["calcly/stats.py"])
    assert (stopped["exit_status"], stopped["limit"], stopped["steps"]) == ("RunCostLimitExceeded", "run_cost", 1)
    solve = json.loads((run / "solve.json").read_text())
    assert solve["executor"]["name"] == "ray" and solve["totals"]["cost"] == pytest.approx(4 * CALL_COST)
    assert files_holding(run, KEY) == [] and KEY not in proc.stdout + proc.stderr
