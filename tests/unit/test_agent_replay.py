"""A replay compared with its recording (harness.agents.replay, .observations, .submissions).

The recordings are the 62 shared mini-swe-agent 1.15.0 trajectories; a "replay" is the recorded message
list itself, or a copy with one thing changed, so each test knows the one difference it must find (or must
not). Diffs for the submission comparison are written by real ``git`` in a temporary repository.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import subprocess
from pathlib import Path

import pytest
from jinja2 import StrictUndefined, Template

from harness.agents.observations import RULES, normalise_observation
from harness.agents.replay import compare_replay, render_replay_summary, summarise_replays
from harness.agents.submissions import (AGENT_OUTPUT_DIFFERS, ENVIRONMENT_ARTEFACT, compare_submissions,
                                        parse_patch)
from harness.agents.trajectories import OBSERVATION, TIMEOUT, find_trajectories, load_trajectory
from harness.errors import InputError
from tests import trajectory_data

REQUESTS = "psf__requests-1142"


@pytest.fixture(scope="module")
def found() -> dict[str, Path]:
    trajectory_data.require()
    return find_trajectories(trajectory_data.TRAJS)


@pytest.fixture(scope="module")
def loaded(found):
    return {instance_id: load_trajectory(path) for instance_id, path in found.items()}


@pytest.fixture(scope="module")
def messages(found):
    return {instance_id: json.loads(gzip.decompress(path.read_bytes()))["messages"]
            for instance_id, path in found.items()}


def observation_index(messages: list[dict], step: int) -> int:
    """Where the message that answered ``step`` (1-based) is in the list."""
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    return assistants[step - 1] + 1


def with_observation(messages: list[dict], step: int, content: str) -> list[dict]:
    changed = copy.deepcopy(messages)
    changed[observation_index(changed, step)]["content"] = content
    return changed


def find_step(loaded, predicate):
    """(instance id, step index, observation text) of the first recorded observation matching."""
    for instance_id, recorded in sorted(loaded.items()):
        for step in recorded.steps:
            for observation in step.observations:
                if predicate(observation):
                    return instance_id, step.index, observation.content
    raise AssertionError("no recorded observation matches")


def replay_with(loaded, messages, instance_id, step, content):
    recorded = loaded[instance_id]
    return compare_replay(recorded, with_observation(messages[instance_id], step, content), recorded.submission)


def test_every_trajectory_replayed_as_recorded_agrees_fully(loaded, messages):
    for instance_id, recorded in loaded.items():
        comparison = compare_replay(recorded, messages[instance_id], recorded.submission,
                                    tree_patch=recorded.submission)
        assert comparison.observation_agreement == 1.0 and comparison.returncode_agreement == 1.0, instance_id
        assert comparison.first_divergent_step is None and comparison.same_submission
        assert comparison.steps_compared == comparison.recorded_steps == comparison.replayed_steps
        assert comparison.prompts_equal and comparison.outputs_fed_back
        data = json.loads(json.dumps(comparison.to_json()))
        assert data["same_submission"] is True and data["first_divergent_step"] is None
        assert data["observation_agreement"] == 1.0 and data["tree_patch_vs_submission"]["same"] is True


def test_a_perturbed_observation_is_found_at_its_step(loaded, messages):
    instance_id = "pydata__xarray-4094"
    recorded = loaded[instance_id]
    step = recorded.steps[9]
    assert step.observations[0].kind == OBSERVATION and "\n" in step.observations[0].content
    lines = step.observations[0].content.split("\n")
    lines[2] = lines[2] + " (changed)"
    comparison = replay_with(loaded, messages, instance_id, step.index, "\n".join(lines))
    assert comparison.first_divergent_step == step.index == 10
    n = len(recorded.steps)
    assert comparison.observation_agreement == pytest.approx((n - 1) / n)
    assert comparison.returncode_agreement == 1.0 and comparison.same_submission
    detail = comparison.to_json()["steps"][step.index - 1]
    assert detail["equal"] is False and detail["first_difference"]["line"] == 3
    assert detail["first_difference"]["replayed"].endswith(" (changed)")
    assert detail["recorded_head"] == step.observations[0].content[:2000]
    assert all(s["equal"] for s in comparison.to_json()["steps"] if s["step"] != step.index)


def test_a_different_return_code_is_a_divergence_even_with_the_same_output(loaded, messages):
    instance_id, index, content = find_step(loaded, lambda o: o.content.startswith("<returncode>0</returncode>"))
    comparison = replay_with(loaded, messages, instance_id, index,
                             content.replace("<returncode>0</returncode>", "<returncode>1</returncode>", 1))
    assert comparison.first_divergent_step == index
    detail = comparison.steps[index - 1]
    assert detail.returncodes == (0, 1) and not detail.equal
    assert comparison.returncode_agreement == pytest.approx(1 - 1 / comparison.returncode_steps)


def test_a_duration_is_normalised_but_a_test_outcome_and_an_assertion_message_are_not(loaded, messages):
    summary = re.compile(r"^=+ (\d+) passed in (\d+\.\d+)s =+$", re.M)
    instance_id, index, content = find_step(loaded, lambda o: summary.search(o.content) is not None)
    line = summary.search(content).group(0)
    count, seconds = summary.search(content).groups()
    slower = f" {count} passed in {float(seconds) + 100:.2f}s "
    padding = (len(line) - len(slower)) // 2
    slower_line = "=" * padding + slower + "=" * (len(line) - len(slower) - padding)
    assert len(slower_line) == len(line) and slower_line != line  # the padding shrank by the digits added
    assert replay_with(loaded, messages, instance_id, index, content.replace(line, slower_line)
                       ).first_divergent_step is None
    failed = slower_line.replace(f" {count} passed", f" {count} failed")
    assert replay_with(loaded, messages, instance_id, index, content.replace(line, failed)
                       ).first_divergent_step == index

    assertion = re.compile(r"^E\s+(assert|AssertionError).*\d.*$", re.M)
    instance_id, index, content = find_step(loaded, lambda o: assertion.search(o.content) is not None)
    message = assertion.search(content).group(0)
    other = re.sub(r"\d", lambda m: str((int(m.group(0)) + 1) % 10), message, count=1)
    comparison = replay_with(loaded, messages, instance_id, index, content.replace(message, other, 1))
    assert comparison.first_divergent_step == index
    assert comparison.steps[index - 1].difference[2] == other


def test_addresses_and_temporary_names_are_normalised_but_what_surrounds_them_is_not(loaded, messages):
    instance_id, index, content = find_step(loaded, lambda o: " object at 0x" in o.content)
    address = re.search(r" object at (0x[0-9a-f]+)", content).group(1)
    moved = content.replace(address, "0x7f0000001234")
    assert replay_with(loaded, messages, instance_id, index, moved).first_divergent_step is None
    renamed = re.sub(r"<([\w.]+) object at", r"<\1Other object at", content, count=1)
    assert replay_with(loaded, messages, instance_id, index, renamed).first_divergent_step == index

    instance_id, index, content = find_step(loaded, lambda o: "/tmp/pytest-of-root/pytest-" in o.content)
    as_other_user = re.sub(r"/pytest-of-root/pytest-\d+", "/pytest-of-harness/pytest-0", content)
    assert replay_with(loaded, messages, instance_id, index, as_other_user).first_divergent_step is None
    elsewhere = content.replace("/tmp/pytest-of-root/", "/var/tmp/pytest-of-root/", 1)
    assert replay_with(loaded, messages, instance_id, index, elsewhere).first_divergent_step == index


def test_a_long_output_s_cuts_move_with_a_duration_but_a_changed_line_still_counts(loaded):
    template = loaded["pydata__xarray-4094"].config["agent"]["action_observation_template"]

    def render(output: str, returncode: int = 0) -> str:  # mini-swe-agent's own template, rendered as it does
        return Template(template, undefined=StrictUndefined).render(
            output={"output": output, "returncode": returncode})

    body = "".join(f"xarray/tests/test_{i:04d}.py ........................................ [ {i % 100:2d}%]\n"
                   for i in range(240))
    fast = render(body + "==== 12 failed, 3000 passed in 9.87s ====\n")
    slow = render(body + "==== 12 failed, 3000 passed in 129.87s ===\n")
    assert "<elided_chars>" in fast and fast != slow
    assert normalise_observation(fast) == normalise_observation(slow)
    changed = render(body.replace("test_0230.py", "test_0231.py") + "==== 12 failed, 3000 passed in 129.87s ===\n")
    assert normalise_observation(changed) != normalise_observation(fast)
    shorter = render(body[:-100] + "==== 12 failed, 3000 passed in 9.87s ====\n")
    assert normalise_observation(shorter) != normalise_observation(fast)  # the tail's whole lines differ
    # a duration near the start moves the head's cut too
    early = render("Ran 3 tests in 0.032s\n" + body)
    later = render("Ran 3 tests in 10.032s\n" + body)
    assert early.split("</output_head>")[0] != later.split("</output_head>")[0][:-1]
    assert normalise_observation(early) == normalise_observation(later)


def test_durations_are_erased_only_in_pytest_s_and_unittest_s_summary_forms():
    assert normalise_observation("===== 2 failed, 1 passed, 3 warnings in 1.52s =====") == \
        "= 2 failed, 1 passed, 3 warnings in <duration> ="
    assert normalise_observation("1 passed in 0.03 seconds") == "1 passed in <duration>"
    assert normalise_observation("Ran 12 tests in 0.018s") == "Ran 12 tests in <duration>"
    for kept in ("Finished in 0.25s", "===== sleeping in 1.50s =====", "1 passed in 0.03 seconds, then more"):
        assert normalise_observation(kept) == kept


def test_a_timeout_is_compared_without_the_killed_command_s_partial_output(loaded, messages):
    instance_id, index, content = find_step(loaded, lambda o: o.kind == TIMEOUT)
    further = content.replace("\n</output>", "\nmore output before the kill\n</output>", 1)
    assert replay_with(loaded, messages, instance_id, index, further).first_divergent_step is None
    other = re.sub(r"<command>(.*?)</command>", r"<command>\1 -x</command>", content, count=1)
    assert replay_with(loaded, messages, instance_id, index, other).first_divergent_step == index


def test_every_rule_changes_some_recorded_observation(loaded):
    """Each normalisation rule is there for something the 62 recordings hold."""
    used = set()
    for recorded in loaded.values():
        for step in recorded.steps:
            for observation in step.observations:
                used |= {rule.name for rule in RULES if rule.apply(observation.content) != observation.content}
    assert used == {rule.name for rule in RULES}


def test_a_replay_that_stops_early_disagrees_on_every_missing_step(loaded, messages):
    instance_id = "pylint-dev__pylint-6903"
    recorded = loaded[instance_id]
    cut = observation_index(messages[instance_id], 10) + 1  # steps 1-10 replayed, nothing after
    comparison = compare_replay(recorded, messages[instance_id][:cut], "")
    assert comparison.replayed_steps == 10 and comparison.steps_compared == len(recorded.steps) == 16
    assert comparison.first_divergent_step == 11
    assert comparison.observation_agreement == pytest.approx(10 / 16)
    assert not comparison.same_submission and comparison.outputs_fed_back


def test_a_replay_fed_other_outputs_says_so(loaded, messages):
    instance_id = "pylint-dev__pylint-6903"
    changed = copy.deepcopy(messages[instance_id])
    changed[observation_index(changed, 3) - 1]["content"] += "\n"
    comparison = compare_replay(loaded[instance_id], changed, loaded[instance_id].submission)
    assert not comparison.outputs_fed_back
    assert comparison.to_json()["steps"][2]["output_equal"] is False


def test_replayed_messages_that_are_no_trajectory_are_refused(loaded):
    recorded = loaded["pylint-dev__pylint-6903"]
    with pytest.raises(InputError, match="the replay of pylint-dev__pylint-6903") as caught:
        compare_replay(recorded, [{"role": "system", "content": "x"}, {"role": "tool", "content": "y"}], "")
    assert caught.value.field == "messages[1].role"


# --- submissions -----------------------------------------------------------------------------------

def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    (path / "module.py").write_text("".join(f"line {i}\n" for i in range(40)))
    (path / "tox.ini").write_text("[testenv]\ndeps = pytest\ncommands=\n    python -X dev -m pytest --durations 25 {posargs}\n")
    (path / "image.png").write_bytes(b"\x89PNG\x00\x01")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    return path


def diff(repo: Path, abbrev: int) -> str:
    git(repo, "add", "-A")
    return git(repo, "-c", f"core.abbrev={abbrev}", "diff", "--cached")


def test_index_line_hash_lengths_are_ignored_but_content_is_not(repo):
    (repo / "module.py").write_text((repo / "module.py").read_text().replace("line 7\n", "line seven\n"))
    (repo / "image.png").write_bytes(b"\x89PNG\x00\x02")
    short, long = diff(repo, 7), diff(repo, 12)
    assert short != long and "Binary files a/image.png and b/image.png differ" in short
    same = compare_submissions(long, short, repository="pytest-dev/pytest")
    assert same.same and same.equal_files == 2 and not same.differences

    (repo / "module.py").write_text((repo / "module.py").read_text().replace("line seven\n", "line 7 \n"))
    content = compare_submissions(long, diff(repo, 7), repository="pytest-dev/pytest")
    assert not content.same and [d.path for d in content.differences] == ["module.py"]
    assert content.differences[0].hunks_equal is False and content.differences[0].kind == AGENT_OUTPUT_DIFFERS

    (repo / "module.py").write_text((repo / "module.py").read_text().replace("line 7 \n", "line seven\n"))
    (repo / "image.png").write_bytes(b"\x89PNG\x00\x03")  # a binary stub differs only by its blob id
    binary = compare_submissions(long, diff(repo, 7), repository="pytest-dev/pytest")
    assert [(d.path, d.header_equal, d.hunks_equal) for d in binary.differences] == [("image.png", False, True)]


def test_requests_1142_build_tree_is_an_environment_artefact(loaded):
    recorded = loaded[REQUESTS].submission
    files = parse_patch(recorded)[1]
    build = [f.path for f in files.values() if f.path.startswith("build/")]
    assert len(build) == 65 and all(f.new_file for f in files.values() if f.path.startswith("build/"))
    without_build = "".join(part for part in re.split(r"(?=^diff --git )", recorded, flags=re.M)
                            if not part.startswith("diff --git a/build/"))
    comparison = compare_submissions(recorded, without_build, repository="psf/requests")
    assert not comparison.same and comparison.same_except_environment_artefacts
    assert sorted(d.path for d in comparison.differences) == sorted(build)
    assert {d.kind for d in comparison.differences} == {ENVIRONMENT_ARTEFACT}
    assert comparison.differences[0].to_json()["explained_by"]["source"].startswith(
        "SWE-bench swebench/harness/constants/python.py: SPECS_REQUESTS")
    assert comparison.equal_files == 1  # requests/models.py, the agent's change

    # the agent's own change differing is still the agent's, beside the artefacts
    other_fix = re.sub(r"^\+(?!\+\+ )", "+ ", without_build, count=1, flags=re.M)  # an added line, not +++
    assert other_fix != without_build
    mixed = compare_submissions(recorded, other_fix, repository="psf/requests")
    kinds = {d.path: d.kind for d in mixed.differences}
    assert [d.hunks_equal for d in mixed.differences if d.path == "requests/models.py"] == [False]
    assert kinds.pop("requests/models.py") == AGENT_OUTPUT_DIFFERS and set(kinds.values()) == {ENVIRONMENT_ARTEFACT}
    assert not mixed.same_except_environment_artefacts
    # and the same tree in another repository is nobody's set-up
    elsewhere = compare_submissions(recorded, without_build, repository="pydata/xarray")
    assert {d.kind for d in elsewhere.differences} == {AGENT_OUTPUT_DIFFERS}


def test_a_set_up_edit_is_an_artefact_only_when_it_is_exactly_the_set_up_s(repo):
    git(repo, "add", "-A")
    agent_fix = (repo / "module.py").read_text().replace("line 3\n", "line three\n")
    (repo / "module.py").write_text(agent_fix)
    submission = diff(repo, 7)
    tox = (repo / "tox.ini").read_text()
    (repo / "tox.ini").write_text("\n".join(line.replace("pytest", "pytest -rA", 1) for line in tox.split("\n")))
    with_set_up = diff(repo, 7)  # the pristine base's view of SWE-bench's sphinx image
    comparison = compare_submissions(submission, with_set_up, repository="sphinx-doc/sphinx")
    assert [(d.path, d.kind) for d in comparison.differences] == [("tox.ini", ENVIRONMENT_ARTEFACT)]
    assert comparison.differences[0].rule.name == "tox.ini runs pytest -rA"

    (repo / "tox.ini").write_text(tox.replace("--durations 25", "-x --durations 25"))
    another_edit = diff(repo, 7)
    assert [d.kind for d in compare_submissions(submission, another_edit, repository="sphinx-doc/sphinx"
                                                ).differences] == [AGENT_OUTPUT_DIFFERS]
    (repo / "tox.ini").write_text("\n".join(line.replace("pytest", "pytest -rA", 1) for line in tox.split("\n"))
                                  .replace("[testenv]", "[testenv:py39]"))
    set_up_and_more = diff(repo, 7)
    assert [d.kind for d in compare_submissions(submission, set_up_and_more, repository="sphinx-doc/sphinx"
                                                ).differences] == [AGENT_OUTPUT_DIFFERS]
    (repo / "tox.ini").write_text("\n".join(line.replace("pytest", "pytest -rA", 1) for line in tox.split("\n"))
                                  + "setenv = PYTHONWARNINGS=error\n")
    set_up_and_a_new_line = diff(repo, 7)
    assert [d.kind for d in compare_submissions(submission, set_up_and_a_new_line, repository="sphinx-doc/sphinx"
                                                ).differences] == [AGENT_OUTPUT_DIFFERS]


def test_the_tree_patch_is_compared_with_the_replayed_submission(loaded, messages):
    instance_id = "pydata__xarray-4094"
    recorded = loaded[instance_id]
    shorter_ids = re.sub(r"^index ([0-9a-f]{7})[0-9a-f]*\.\.([0-9a-f]{7})[0-9a-f]*", r"index \1..\2",
                         recorded.submission, flags=re.M)
    assert shorter_ids != recorded.submission
    same = compare_replay(recorded, messages[instance_id], recorded.submission, tree_patch=shorter_ids)
    assert same.tree_patch is not None and same.tree_patch.same
    extra = shorter_ids + "diff --git a/notes.txt b/notes.txt\nnew file mode 100644\nindex 0000000..1111111\n" \
                          "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+x\n"
    differs = compare_replay(recorded, messages[instance_id], recorded.submission, tree_patch=extra)
    tree = differs.to_json()["tree_patch_vs_submission"]
    assert tree["same"] is False and tree["compared"] == ["submission", "tree"]
    assert tree["differences"] == [{"path": "notes.txt", "present_in": ["tree"], "header_equal": None,
                                    "hunks_equal": None, "hunks": [0, 1], "class": AGENT_OUTPUT_DIFFERS,
                                    "explained_by": None}]


def test_the_summary_pools_per_repository_and_renders_as_markdown(loaded, messages):
    comparisons = {}
    for instance_id, recorded in loaded.items():
        replayed = messages[instance_id]
        if instance_id.startswith("pytest-dev__"):  # every pytest replay diverges at its 2nd step
            replayed = with_observation(replayed, 2, "<returncode>127</returncode>\n<output>\nbash: python: command"
                                                     " not found\n</output>")
        comparisons[instance_id] = compare_replay(recorded, replayed, recorded.submission)
    summary = summarise_replays(comparisons)
    pytest_row, xarray_row = summary["by_repository"]["pytest-dev/pytest"], summary["by_repository"]["pydata/xarray"]
    pytest_steps = sum(len(loaded[i].steps) for i in loaded if i.startswith("pytest-dev__"))
    assert pytest_row["instances"] == 19 and pytest_row["steps_compared"] == pytest_steps
    assert pytest_row["observation_agreement"] == pytest.approx((pytest_steps - 19) / pytest_steps)
    assert pytest_row["fully_agreeing_instances"] == 0 and pytest_row["first_divergent_step_median"] == 2
    assert xarray_row["observation_agreement"] == 1.0 and xarray_row["fully_agreeing_instances"] == 22
    assert summary["overall"]["same_submission"] == 62
    assert summary["first_divergent_step_histogram"]["2"] == 19 and summary["first_divergent_step_histogram"][
        "none"] == 43
    table = render_replay_summary(summary)
    assert "| pytest-dev/pytest | 19 | 19 | 19 |" in table and "| **all** | 62 |" in table
    assert f"({pytest_steps - 19}/{pytest_steps})" in table


def test_replay_json_keeps_the_heads_of_the_first_diverging_steps_only(loaded, messages):
    instance_id = "pytest-dev__pytest-7490"  # 97 steps
    replayed = copy.deepcopy(messages[instance_id])
    for step in range(1, 41):
        replayed[observation_index(replayed, step)]["content"] += "x" * 5000
    data = compare_replay(loaded[instance_id], replayed, loaded[instance_id].submission).to_json()
    diverging = [s for s in data["steps"] if not s["equal"]]
    assert len(diverging) == 40 and data["first_divergent_step"] == 1
    assert all(len(s["recorded_head"]) <= 2000 and len(s["replayed_head"]) <= 2000 for s in diverging[:20])
    assert not any("recorded_head" in s for s in diverging[20:])
    assert all("first_difference" in s for s in diverging)
    assert len(json.dumps(data)) < 150_000
