"""`harness solve` before anything runs: the flags (refused loudly, one line, exit 2), the
plan (what each attempt is given; replay pairing, where every gap is named) and the records
read back (resume keeps what the same inputs decided)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from harness.agents.budgets import Budgets
from harness.agents.node import AttemptTask
from harness.agents.pins import parse_pin
from harness.agents.scaffold import AttemptRecord, AttemptSpec, same_diff
from harness.agents.scaffolds.mini_swe_agent import MiniSweAgent
from harness.cli import build_parser, main
from harness.inputs.demo import DEMO_DIR
from harness.inputs.instances import load_instances
from harness.paths import RunPaths
from harness.run.solve_plan import given_for, inputs_sha256, plan_live, plan_replay, recorded_config
from harness.run.solve_records import complete_earlier, prediction_lines

SHARED_TRAJS = Path(__file__).resolve().parents[3] / "shared" / "trajectories" / \
    "mini-swe-agent-1.15.0__gemini-3-pro-preview" / "trajs"
CONFIG = {"agent": {"step_limit": 250, "cost_limit": 3.0, "instance_template": "{{task}}"},
          "model": {"model_name": "openai/gpt-4o-mini", "model_kwargs": {"temperature": 0.0}},
          "environment": {"cwd": "/testbed", "timeout": 60, "env": {"PAGER": "cat"}}}


def _instances():
    return load_instances(DEMO_DIR / "instances.jsonl").instances


# ---------------------------------------------------------------------------- flags

@pytest.mark.parametrize("argv, says", [
    (["solve"], "--model NAME"),
    (["solve", "--replay", "x", "--config", "c.yaml"], "--model and --config do not apply"),
    (["solve", "--replay", "x", "--attempts", "3"], "--attempts and --give do not apply"),
    (["solve", "--model", "m", "--scaffold", "mini-swe-agent>=1.15"], "exact NAME==VERSION"),
    (["solve", "--model", "m", "--scaffold-with", "litellm==1.82.8"], "credential stealer"),
    (["solve", "--model", "m", "--scaffold", "no-such-scaffold==1.0"], "unknown scaffold"),
])
def test_a_solve_that_cannot_run_is_refused_in_one_line_before_anything_runs(argv, says, capsys, tmp_path):
    code = main([*argv, "--output-dir", str(tmp_path), "--cache-dir", str(tmp_path / "cache")])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "cache" / "scaffolds").exists()      # nothing was installed


@pytest.mark.parametrize("argv", [["solve", "--model", "m", "--replay", "d"],
                                  ["solve", "--model", "m", "--give", "answers"],
                                  ["solve", "--model", "m", "--attempts", "0"],
                                  ["solve", "--model", "m", "--attempts", "101"],
                                  ["solve", "--model", "m", "--step-limit", "0"],
                                  ["solve", "--model", "m", "--wall-time-limit", "nan"],
                                  ["solve", "--model", "m", "--run-cost-limit", "-1"]])
def test_contradictory_or_out_of_range_flags_exit_2(argv):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2


def test_the_flags_say_what_they_say():
    args = build_parser().parse_args(["solve", "--model", "openai/gpt-4o-mini", "--step-limit", "30",
                                      "--cost-limit", "1.5", "--wall-time-limit", "600", "--run-cost-limit", "20",
                                      "--attempts", "3", "--give", "hints", "reference-files", "--grade",
                                      "--scaffold-with", "litellm==1.80.0"])
    assert (args.model, args.step_limit, args.cost_limit, args.wall_time_limit, args.run_cost_limit) == (
        "openai/gpt-4o-mini", 30, 1.5, 600.0, 20.0)
    assert args.attempts == 3 and args.give == ["hints", "reference-files"] and args.grade
    assert args.scaffold == "mini-swe-agent==1.15.0" and args.scaffold_with == ["litellm==1.80.0"]


# ---------------------------------------------------------------------------- the plan

def test_the_agent_is_given_the_problem_statement_only_unless_asked():
    instance = _instances()[0]
    text, given = given_for(instance, False, False)
    assert text == instance.problem_statement
    assert given == {"problem_statement": True, "hints": False, "reference_files": False}
    text, given = given_for(instance, False, True)
    assert given["reference_files"] == ["calcly/stats.py"] and "<files_to_change>\ncalcly/stats.py" in text


def test_a_live_plan_is_one_spec_per_instance_and_attempt_with_the_flags_applied():
    scaffold = MiniSweAgent()
    config = scaffold.attempt_config(CONFIG, "anthropic/claude-x", Budgets(step_limit=7, cost_limit=0.5))
    assert config["model"]["model_name"] == "anthropic/claude-x"
    assert (config["agent"]["step_limit"], config["agent"]["cost_limit"]) == (7, 0.5)
    assert CONFIG["agent"]["step_limit"] == 250                   # the given config is not changed
    plan = plan_live(_instances(), scaffold, parse_pin(), config, Budgets(step_limit=7), 3, False, False)
    assert [(t.instance.instance_id, t.spec.attempt) for t in plan.tasks[:3]] == [
        ("harness-demo__calcly-1", 1), ("harness-demo__calcly-1", 2), ("harness-demo__calcly-1", 3)]
    assert len(plan.tasks) == 12 and {t.spec.pin for t in plan.tasks} == {"mini-swe-agent==1.15.0"}
    single = plan_live(_instances(), scaffold, parse_pin(), config, Budgets(), 1, False, False)
    assert {t.spec.attempt for t in single.tasks} == {None}     # one attempt: no attempt directories


def test_a_config_the_sandbox_cannot_honour_is_refused_naming_the_field():
    from harness.errors import InputError
    scaffold = MiniSweAgent()
    with pytest.raises(InputError, match="env_startup_command") as caught:
        scaffold.attempt_config({**CONFIG, "run": {"env_startup_command": "pip install x"}}, None, Budgets())
    assert "run.env_startup_command" in caught.value.field
    with pytest.raises(InputError, match="mapping"):
        scaffold.attempt_config({**CONFIG, "agent": ["not", "a", "mapping"]}, None, Budgets())


def test_what_decides_an_attempt_changes_with_each_input():
    instance = _instances()[0]
    spec = AttemptSpec(instance.instance_id, None, "task", {"problem_statement": True}, CONFIG, Budgets(), "p==1")
    key = inputs_sha256(AttemptTask(instance, spec))
    from dataclasses import replace
    for changed in (replace(spec, task="other"), replace(spec, budgets=Budgets(step_limit=3)),
                    replace(spec, pin="p==2"), replace(spec, attempt=2),
                    replace(spec, config={**CONFIG, "agent": {**CONFIG["agent"], "step_limit": 1}})):
        assert inputs_sha256(AttemptTask(instance, changed)) != key
    assert inputs_sha256(AttemptTask(instance, replace(spec))) == key


@pytest.mark.skipif(not SHARED_TRAJS.is_dir(), reason="the shared trajectories are absent")
def test_a_replay_plan_takes_pin_config_and_outputs_from_each_trajectory_and_names_every_gap(tmp_path):
    from harness.inputs.instances import Instance
    ids = ["psf__requests-2317", "pytest-dev__pytest-7490"]
    for iid in ids + ["pallets__flask-5014"]:
        shutil.copy(SHARED_TRAJS / f"{iid}.traj.json.gz", tmp_path)
    broken = tmp_path / "pydata__xarray-1.traj.json"
    broken.write_text('{"trajectory_format": "mini-swe-agent-1"}')
    instances = [Instance(i, "o/r", "0" * 40, "", "", (), (), problem_statement="p")
                 for i in ids + ["pydata__xarray-1", "o__r-9"]]
    plan = plan_replay(instances, tmp_path, MiniSweAgent(), Budgets())
    assert [t.instance.instance_id for t in plan.tasks] == ids
    assert plan.without_trajectory == ["o__r-9"] and plan.trajectories_without_instance == ["pallets__flask-5014"]
    assert list(plan.refused) == ["pydata__xarray-1"] and "info" in plan.refused["pydata__xarray-1"]
    spec = plan.tasks[0].spec
    recorded = json.loads(gzip.open(SHARED_TRAJS / "psf__requests-2317.traj.json.gz").read())
    assert spec.pin == "mini-swe-agent==1.15.0" and spec.mode == "replay"
    assert spec.config == recorded_config(recorded["info"]["config"]) and "agent_type" not in spec.config
    assert len(spec.replay) == recorded["info"]["model_stats"]["api_calls"] == 33
    assert spec.replay[0].content == recorded["messages"][2]["content"]
    assert sum(s.cost for s in spec.replay) == recorded["info"]["model_stats"]["instance_cost"]
    # a selection of the file: a trajectory of an instance not selected is no orphan
    chosen = plan_replay(instances[:1], tmp_path, MiniSweAgent(), Budgets(),
                         in_file={i.instance_id for i in instances} | {"pallets__flask-5014"})
    assert chosen.trajectories_without_instance == [] and chosen.without_trajectory == []


# ---------------------------------------------------------------------------- records

def _record(**changes) -> AttemptRecord:
    base = dict(instance_id="a__b-1", attempt=None, mode="live", scaffold={"name": "mini-swe-agent", "version": "1.15.0"},
                model={"name": "openai/gpt-4o-mini"}, budgets={}, given={}, exit_status="Submitted",
                usage={"cost": 0.5, "calls": 4}, steps=4, wall_seconds=12.5,
                prediction={"sha256": "x", "files": ["f.py"]}, inputs_sha256="key")
    return AttemptRecord(**{**base, **changes})


def test_a_complete_earlier_attempt_is_kept_only_for_the_same_inputs(tmp_path):
    files = RunPaths(tmp_path).instance("a__b-1")
    files.root.mkdir()
    files.agent_record.write_text(json.dumps(_record().to_json()))
    assert complete_earlier(files, "key") is None               # its prediction file is missing
    files.agent_patch.write_text("diff")
    assert complete_earlier(files, "key").exit_status == "Submitted"
    assert complete_earlier(files, "other") is None
    files.agent_record.write_text(json.dumps(_record(exit_status="InfrastructureError").to_json()))
    assert complete_earlier(files, "key") is None               # an attempt that never ran is run again
    files.agent_record.write_text("{cut")
    assert complete_earlier(files, "key") is None


def test_predictions_are_swe_bench_lines_with_the_agent_fields(tmp_path):
    instance = _instances()[0]
    spec = AttemptSpec(instance.instance_id, 2, "t", {}, CONFIG, Budgets())
    files = RunPaths(tmp_path).instance(instance.instance_id, 2)
    files.root.mkdir(parents=True)
    files.agent_record.write_text(json.dumps(_record(instance_id=instance.instance_id, attempt=2).to_json()))
    files.agent_patch.write_text("diff --git a/f.py b/f.py\n")
    lines, without = prediction_lines(RunPaths(tmp_path), [AttemptTask(instance, spec)], lambda r: "m-1__x")
    assert without == [] and lines == [{"instance_id": instance.instance_id, "model_name_or_path": "m-1__x",
                                        "model_patch": "diff --git a/f.py b/f.py\n", "attempt": 2, "cost": 0.5,
                                        "calls": 4, "steps": 4, "agent_seconds": 12.5, "exit_status": "Submitted"}]
    other = AttemptTask(instance, AttemptSpec(instance.instance_id, 3, "t", {}, CONFIG, Budgets()))
    assert prediction_lines(RunPaths(tmp_path), [other], lambda r: "")[1] == [f"{instance.instance_id}#3"]


def test_a_submission_equals_the_tree_diff_as_git_applies_them():
    tree = "diff --git a/f b/f\nindex 1234567..89abcde 100644\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n"
    submission = tree.replace("1234567..89abcde", "1234567890..89abcdef01") + "\n"
    assert same_diff(submission, tree) is True
    assert same_diff(submission.replace("+b", "+c"), tree) is False and same_diff(None, tree) is None


def test_a_run_names_one_model_the_most_common_of_its_attempts():
    from collections import Counter
    from harness.run.solve_session import run_model_name
    # the shared replay: 60 trajectories through OpenRouter, 2 through Portkey's "@" route
    names = Counter({"mini-swe-agent-1.15.0__google/gemini-3-pro-preview": 60,
                     "mini-swe-agent-1.15.0__@google/gemini-3-pro-preview": 2})
    assert run_model_name(names) == "mini-swe-agent-1.15.0__google/gemini-3-pro-preview"
    assert run_model_name(Counter({"b": 1, "a": 1})) == "a"  # a tie: the first in order, every time
    assert run_model_name(Counter()) == ""
