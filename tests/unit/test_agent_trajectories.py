"""Recorded trajectories read and checked (harness.agents.trajectories), on the 62 shared mini-swe-agent
1.15.0 trajectories and on broken copies of them."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from harness.agents import trajectories as traj
from harness.agents.trajectories import (EXIT, FORMAT_ERROR, OBSERVATION, SUBMISSION, TIMEOUT, find_trajectories,
                                         load_trajectory)
from harness.errors import InputError
from tests import trajectory_data

REQUESTS = "psf__requests-1142"
SMALL = "pylint-dev__pylint-6903"  # 16 steps


@pytest.fixture(scope="module")
def found() -> dict[str, Path]:
    trajectory_data.require()
    return find_trajectories(trajectory_data.TRAJS)


@pytest.fixture(scope="module")
def loaded(found):
    return {instance_id: load_trajectory(path) for instance_id, path in found.items()}


def raw(found, instance_id: str) -> dict:
    return json.loads(gzip.decompress(found[instance_id].read_bytes()))


def write(tmp_path: Path, instance_id: str, data: object, *, compress: bool = False) -> Path:
    text = (data if isinstance(data, str) else json.dumps(data)).encode()
    if compress:
        path = tmp_path / f"{instance_id}.traj.json.gz"
        path.write_bytes(gzip.compress(text))
    else:
        path = tmp_path / f"{instance_id}.traj.json"
        path.write_bytes(text)
    return path


def test_every_shared_trajectory_loads_with_its_submission_steps_and_costs(found, loaded):
    predictions = {p["instance_id"]: p for p in map(json.loads, trajectory_data.PREDICTIONS.read_text().splitlines())}
    assert len(loaded) == 62 and set(loaded) == set(predictions)
    for instance_id, recorded in loaded.items():
        assert recorded.instance_id == instance_id and recorded.format == "mini-swe-agent-1"
        assert recorded.scaffold_version == "1.15.0" and recorded.exit_status == "Submitted"
        assert recorded.submission == predictions[instance_id]["model_patch"]
        assert recorded.config["agent"]["step_limit"] == 250 and recorded.config["environment"]["timeout"] == 60
        assert recorded.system_message.startswith("You are a helpful assistant")
        assert recorded.instance_message.startswith("<pr_description>")
        assert len(recorded.outputs) == len(recorded.steps) == recorded.api_calls
        assert [s.index for s in recorded.steps] == list(range(1, len(recorded.steps) + 1))
        assert recorded.cost_source == "recorded" and all(s.cost is not None for s in recorded.steps)
        assert recorded.step_costs == [s.cost for s in recorded.steps]
        running = 0.0
        for cost in recorded.step_costs:
            running += cost
        assert running == recorded.instance_cost  # the order mini-swe-agent added them in: to the bit
        last = recorded.steps[-1]
        assert [o.kind for o in last.observations] == [SUBMISSION]
        assert last.action == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"


def test_each_message_after_an_output_is_told_apart_as_mini_swe_agent_made_it(found, loaded):
    kinds: dict[str, int] = {}
    for recorded in loaded.values():
        for step in recorded.steps:
            for observation in step.observations:
                kinds[observation.kind] = kinds.get(observation.kind, 0) + 1
                if observation.kind == OBSERVATION:
                    assert observation.content.startswith(f"<returncode>{observation.returncode}</returncode>")
                else:
                    assert observation.returncode is None
                if observation.kind == FORMAT_ERROR:
                    assert step.action is None
                    assert observation.content.startswith("Please always provide EXACTLY ONE action")
                if observation.kind == TIMEOUT:
                    assert step.action is not None and "timed out and has been killed" in observation.content
    assert kinds == {OBSERVATION: 2539, FORMAT_ERROR: 73, TIMEOUT: 7, SUBMISSION: 62}
    # the outputs are the assistant contents exactly as recorded, whatever they hold
    data = raw(found, REQUESTS)
    assert loaded[REQUESTS].outputs == [m["content"] for m in data["messages"] if m["role"] == "assistant"]


def test_missing_step_costs_are_filled_so_the_running_total_is_the_recorded_one(found, loaded, tmp_path):
    for instance_id in list(found)[::6] + [REQUESTS]:
        data = raw(found, instance_id)
        assistants = [m for m in data["messages"] if m["role"] == "assistant"]
        kept = {}
        for i, message in enumerate(assistants):
            if i % 3:  # two of three steps lose their cost, as a model class that records none
                message["extra"].pop("cost", None)
                message["extra"]["response"].get("usage", {}).pop("cost", None)
            else:
                kept[i] = loaded[instance_id].steps[i].cost
        recorded = load_trajectory(write(tmp_path, instance_id, data))
        assert recorded.cost_source == "filled"
        costs = recorded.step_costs
        assert all(costs[i] == cost for i, cost in kept.items())
        running = 0.0
        for cost in costs:
            running += cost
        assert running == recorded.instance_cost, instance_id  # a cost limit trips where it tripped
        assert all(c >= 0 for c in costs)


def test_find_trajectories_takes_both_layouts_and_refuses_a_second_copy(found, tmp_path):
    flat, nested = SMALL, REQUESTS
    shutil.copy(found[flat], tmp_path / f"{flat}.traj.json.gz")
    (tmp_path / nested).mkdir()
    (tmp_path / nested / f"{nested}.traj.json").write_bytes(gzip.decompress(found[nested].read_bytes()))
    (tmp_path / "README.md").write_text("not a trajectory")
    assert find_trajectories(tmp_path) == {flat: tmp_path / f"{flat}.traj.json.gz",
                                           nested: tmp_path / nested / f"{nested}.traj.json"}
    assert load_trajectory(tmp_path / nested / f"{nested}.traj.json").submission == load_trajectory(
        found[nested]).submission

    (tmp_path / f"{nested}.traj.json.gz").write_bytes(found[nested].read_bytes())
    with pytest.raises(InputError, match=f"a second trajectory of '{nested}'") as caught:
        find_trajectories(tmp_path)
    assert caught.value.field == "instance_id"


def test_find_trajectories_refuses_a_misfiled_one_and_an_empty_directory(found, tmp_path):
    with pytest.raises(InputError, match=r"holds no <instance_id>\.traj\.json\.gz or \.traj\.json file"):
        find_trajectories(tmp_path)
    (tmp_path / "other").mkdir()
    shutil.copy(found[SMALL], tmp_path / "other" / f"{SMALL}.traj.json.gz")
    with pytest.raises(InputError, match="in a folder named 'other'"):
        find_trajectories(tmp_path)
    with pytest.raises(InputError, match="not a directory"):
        find_trajectories(tmp_path / "absent")


def _breakages():
    """(what is broken, how, the field the refusal must name)."""
    def set_(path, value):
        def apply(data):
            node = data
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        return apply

    def drop(path):
        def apply(data):
            node = data
            for key in path[:-1]:
                node = node[key]
            del node[path[-1]]
        return apply

    def fourth_message_role(role):
        return set_(["messages", 3, "role"], role)

    def two_outputs_in_a_row(data):
        data["messages"].insert(3, dict(data["messages"][2]))

    return [
        ("another format", set_(["trajectory_format"], "swe-agent"), "trajectory_format"),
        ("no version", drop(["info", "mini_version"]), "info.mini_version"),
        ("no config", drop(["info", "config"]), "info.config"),
        ("a null submission", set_(["info", "submission"], None), "info.submission"),
        ("a string cost", set_(["info", "model_stats", "instance_cost"], "0.3"), "info.model_stats.instance_cost"),
        ("a negative cost", set_(["info", "model_stats", "instance_cost"], -1.0), "info.model_stats.instance_cost"),
        ("a total below the steps' costs", set_(["info", "model_stats", "instance_cost"], 0.01),
         "info.model_stats.instance_cost"),
        ("a boolean call count", set_(["info", "model_stats", "api_calls"], True), "info.model_stats.api_calls"),
        ("calls that are not the steps", set_(["info", "model_stats", "api_calls"], 3), "info.model_stats.api_calls"),
        ("another instance's id", set_(["instance_id"], "psf__requests-9999"), "instance_id"),
        ("a tool message", fourth_message_role("tool"), "messages[3].role"),
        ("two outputs in a row", two_outputs_in_a_row, "messages[3].role"),
        ("no messages", set_(["messages"], {}), "messages"),
        ("a non-text content", set_(["messages", 2, "content"], 42), "messages[2].content"),
        ("a step cost that is no number", set_(["messages", 2, "extra", "response", "usage", "cost"], "free"),
         "messages[2].extra.response.usage.cost"),
        ("a submission that is not the last message", set_(["info", "submission"], "diff --git a/x b/x\n"),
         "info.submission"),
    ]


@pytest.mark.parametrize("what, breakage, field", _breakages(), ids=[b[0] for b in _breakages()])
def test_a_malformed_trajectory_is_refused_naming_the_file_and_the_field(found, tmp_path, what, breakage, field):
    data = raw(found, SMALL)
    breakage(data)
    path = write(tmp_path, SMALL, data, compress=True)
    with pytest.raises(InputError) as caught:
        load_trajectory(path)
    assert caught.value.field == field, str(caught.value)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("content, message", [
    ("{not json", "not JSON"),
    ("[1, 2]", "expected a JSON object"),
])
def test_text_that_is_no_trajectory_is_refused_naming_the_file(tmp_path, content, message):
    path = write(tmp_path, SMALL, content)
    with pytest.raises(InputError, match=message) as caught:
        load_trajectory(path)
    assert str(path) in str(caught.value)


def test_a_broken_gzip_and_a_wrong_file_name_are_refused(found, tmp_path):
    truncated = tmp_path / f"{SMALL}.traj.json.gz"
    truncated.write_bytes(found[SMALL].read_bytes()[:2000])
    with pytest.raises(InputError, match="cannot read the trajectory") as caught:
        load_trajectory(truncated)
    assert str(truncated) in str(caught.value)
    with pytest.raises(InputError, match="not a trajectory file name"):
        load_trajectory(tmp_path / f"{SMALL}.json")


def test_an_oversized_trajectory_is_refused_unread(tmp_path):
    size = traj.MAX_TRAJECTORY_BYTES + 1
    bomb = tmp_path / f"{SMALL}.traj.json.gz"  # 64 MiB of spaces in well under 1 MiB
    with gzip.open(bomb, "wb", compresslevel=1) as handle:
        chunk = b" " * (1 << 20)
        for _ in range(size // len(chunk)):
            handle.write(chunk)
        handle.write(b" " * (size % len(chunk)))
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(InputError, match="larger than 67108864 bytes") as caught:
        load_trajectory(bomb)
    assert str(bomb) in str(caught.value)

    plain = tmp_path / f"{REQUESTS}.traj.json"
    with plain.open("wb") as handle:  # sparse: the size without the disk
        handle.truncate(size)
    with pytest.raises(InputError, match="larger than"):
        load_trajectory(plain)


def test_a_run_that_ended_on_a_limit_keeps_its_last_message_as_an_exit(found, tmp_path):
    data = raw(found, SMALL)
    data["messages"] = data["messages"][:-2]  # the submit output and the submission go
    data["messages"].append({"role": "user", "content": ""})  # str(LimitsExceeded())
    data["info"].update(exit_status="LimitsExceeded", submission="")
    data["info"]["model_stats"]["api_calls"] -= 1
    data["info"]["model_stats"]["instance_cost"] = sum(
        m["extra"]["response"]["usage"]["cost"] for m in data["messages"] if m["role"] == "assistant")
    recorded = load_trajectory(write(tmp_path, SMALL, data))
    assert recorded.exit_status == "LimitsExceeded"
    assert [o.kind for o in recorded.steps[-1].observations] == [OBSERVATION, EXIT]


def test_filled_costs_trip_a_cost_limit_after_the_last_call_as_the_recording_did(found, tmp_path):
    data = raw(found, SMALL)
    for message in data["messages"]:
        if message["role"] == "assistant":
            message["extra"]["response"]["usage"].pop("cost")
    # as if the run had ended on its cost limit: the total is past the limit, the calls all happened
    data["messages"].append({"role": "user", "content": ""})
    data["info"].update(exit_status="LimitsExceeded")
    data["info"]["config"]["agent"]["cost_limit"] = 3.0
    data["info"]["model_stats"]["instance_cost"] = 3.6
    recorded = load_trajectory(write(tmp_path, SMALL, data))
    assert recorded.cost_source == "filled" and recorded.cost_limit == 3.0
    sums, running = [], 0.0
    for cost in recorded.step_costs:
        sums.append(running)  # what the agent compares with the limit before each call
        running += cost
    assert running == 3.6 and all(s < 3.0 for s in sums)
    # with no limit to respect, the shares are equal
    data["info"]["config"]["agent"]["cost_limit"] = 0
    even = load_trajectory(write(tmp_path, SMALL, data)).step_costs
    assert max(even) - min(even) < 1e-12
