"""A replay compared with its recording (pure): each step's observation, the return codes, the submission.

A replay feeds the recorded model outputs back in order, so any difference in what came back is the
environment's. :func:`compare_replay` pairs the recorded steps with the replayed ones by their index:

- a step agrees when every message that followed its output is equal after normalisation
  (harness.agents.observations: durations, addresses, temporary names; a timeout without the killed
  command's partial output; the final submission as git applies it) and of the same kind;
- every recorded step is compared, and so is every replayed one: a step only one side has disagrees, so
  a replay that stopped early never scores higher than one that went on (``steps_compared`` is the longer
  of the two step counts);
- ``returncode_agreement`` is the share of the compared steps where either side has a return code (a
  command ran) whose codes are equal; a format error or a submission has none on either side;
- the submission is compared as git applies it (harness.agents.submissions), with each differing file
  classed ``environment_artefact`` or ``agent_output_differs``; the harness's tree-truth patch, when
  given, is compared with the replayed submission the same way.

:meth:`ReplayComparison.to_json` is the instance's ``replay.json``. :func:`summarise_replays` pools a
run's comparisons per repository and :func:`render_replay_summary` writes them as Markdown tables.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from harness.agents.observations import RULES, first_difference, normalise_observation, without_partial_output
from harness.agents.submissions import SubmissionComparison, canonical_patch, compare_submissions
from harness.agents.trajectories import (SUBMISSION, TIMEOUT, Observation, RecordedStep, RecordedTrajectory,
                                         parse_messages)
from harness.results.run_data import repo_of

#: How much of a diverging step's observations replay.json keeps, per side (characters), and for how many
#: diverging steps (the later ones keep their first differing line only): replay.json stays small
HEAD_CHARS = 2000
LINE_CHARS = 400
HEADS_KEPT = 20


def _comparable(observation: Observation) -> str:
    if observation.kind == SUBMISSION:
        return canonical_patch(observation.content)
    if observation.kind == TIMEOUT:
        return normalise_observation(without_partial_output(observation.content))
    return normalise_observation(observation.content)


def _joined(step: RecordedStep | None) -> str:
    return "\n".join(o.content for o in step.observations) if step else ""


@dataclass(frozen=True)
class StepComparison:
    step: int
    equal: bool
    output_equal: bool                       # the model output fed back is the recorded one
    kinds: tuple[tuple[str, ...], tuple[str, ...]]   # (recorded, replayed) observation kinds
    returncodes: tuple[int | None, int | None]       # (recorded, replayed)
    #: for a diverging step: the first differing line after normalisation (line number, recorded,
    #: replayed), and the head of each side's observations as they came
    difference: tuple[int, str, str] | None = None
    heads: tuple[str, str] | None = None

    def to_json(self, *, heads: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {"step": self.step, "equal": self.equal,
                                "recorded_returncode": self.returncodes[0],
                                "replayed_returncode": self.returncodes[1]}
        if not self.output_equal:
            data["output_equal"] = False
        if self.kinds[0] != self.kinds[1] or not self.equal:
            data["recorded_kinds"], data["replayed_kinds"] = list(self.kinds[0]), list(self.kinds[1])
        if self.difference is not None:
            line, recorded, replayed = self.difference
            data["first_difference"] = {"line": line, "recorded": recorded[:LINE_CHARS],
                                        "replayed": replayed[:LINE_CHARS]}
        if self.heads is not None and heads:
            data["recorded_head"], data["replayed_head"] = self.heads
        return data


def _compare_step(index: int, recorded: RecordedStep | None, replayed: RecordedStep | None) -> StepComparison:
    kinds = (tuple(o.kind for o in recorded.observations) if recorded else (),
             tuple(o.kind for o in replayed.observations) if replayed else ())
    codes = (recorded.returncode if recorded else None, replayed.returncode if replayed else None)
    output_equal = recorded is not None and replayed is not None and recorded.output == replayed.output
    left = [_comparable(o) for o in recorded.observations] if recorded else []
    right = [_comparable(o) for o in replayed.observations] if replayed else []
    equal = recorded is not None and replayed is not None and kinds[0] == kinds[1] and left == right
    if equal:
        return StepComparison(index, True, output_equal, kinds, codes)
    # None when only the kinds differ (e.g. the same text, once an observation and once a submission)
    difference = first_difference("\n".join(left), "\n".join(right))
    return StepComparison(index, False, output_equal, kinds, codes, difference,
                          (_joined(recorded)[:HEAD_CHARS], _joined(replayed)[:HEAD_CHARS]))


@dataclass(frozen=True)
class ReplayComparison:
    instance_id: str
    repository: str
    steps: tuple[StepComparison, ...]
    recorded_steps: int
    replayed_steps: int
    prompts_equal: bool                       # the system and instance messages
    submission: SubmissionComparison          # recorded vs replayed submission
    tree_patch: SubmissionComparison | None   # replayed submission vs the harness's tree-truth patch
    recorded_exit_status: str

    @property
    def steps_compared(self) -> int:
        return len(self.steps)

    @property
    def steps_agreeing(self) -> int:
        return sum(s.equal for s in self.steps)

    @property
    def observation_agreement(self) -> float:
        """Share of the compared steps whose observations agree (1.0 when neither side has a step)."""
        return self.steps_agreeing / self.steps_compared if self.steps else 1.0

    @property
    def returncode_steps(self) -> int:
        return sum(1 for s in self.steps if s.returncodes != (None, None))

    @property
    def returncode_steps_agreeing(self) -> int:
        return sum(1 for s in self.steps if s.returncodes != (None, None) and s.returncodes[0] == s.returncodes[1])

    @property
    def returncode_agreement(self) -> float | None:
        """Share of the steps with a return code on either side whose codes are equal (None: no such step)."""
        return self.returncode_steps_agreeing / self.returncode_steps if self.returncode_steps else None

    @property
    def first_divergent_step(self) -> int | None:
        return next((s.step for s in self.steps if not s.equal), None)

    @property
    def same_submission(self) -> bool:
        return self.submission.same

    @property
    def outputs_fed_back(self) -> bool:
        """Every replayed model output is the recorded one (a replay model that strayed is not a replay)."""
        return all(s.output_equal for s in self.steps[:min(self.recorded_steps, self.replayed_steps)])

    def to_json(self) -> dict[str, Any]:
        """replay.json."""
        return {
            "instance_id": self.instance_id,
            "repository": self.repository,
            "same_submission": self.same_submission,
            "same_submission_except_environment_artefacts": self.submission.same_except_environment_artefacts,
            "first_divergent_step": self.first_divergent_step,
            "observation_agreement": self.observation_agreement,
            "returncode_agreement": self.returncode_agreement,
            "steps_compared": self.steps_compared,
            "steps_agreeing": self.steps_agreeing,
            "recorded_steps": self.recorded_steps,
            "replayed_steps": self.replayed_steps,
            "recorded_exit_status": self.recorded_exit_status,
            "outputs_fed_back": self.outputs_fed_back,
            "prompts_equal": self.prompts_equal,
            "normalisation": [rule.name for rule in RULES],
            "submission": self.submission.to_json(),
            "tree_patch_vs_submission": None if self.tree_patch is None else self.tree_patch.to_json(),
            "steps": self._steps_json(),
        }

    def _steps_json(self) -> list[dict[str, Any]]:
        steps, diverging = [], 0
        for step in self.steps:
            diverging += not step.equal
            steps.append(step.to_json(heads=diverging <= HEADS_KEPT))
        return steps


def compare_replay(recorded: RecordedTrajectory, replayed_messages: Sequence[Mapping[str, Any]],
                   replayed_submission: str, tree_patch: str | None = None, *,
                   replayed_exit_status: str | None = None) -> ReplayComparison:
    """Compare a replay's messages (mini-swe-agent's ``agent.messages``, system message first) and its
    submission with the recording. ``tree_patch`` is the harness's diff of the replayed tree, compared
    with the replayed submission. Raises InputError when the messages are no mini-swe-agent-1 list."""
    system, instance, replayed = parse_messages(
        list(replayed_messages), source=f"the replay of {recorded.instance_id}",
        exit_status=replayed_exit_status, submission=replayed_submission)
    repository = repo_of(recorded.instance_id)
    count = max(len(recorded.steps), len(replayed))
    steps = tuple(_compare_step(i + 1, recorded.steps[i] if i < len(recorded.steps) else None,
                                replayed[i] if i < len(replayed) else None) for i in range(count))
    return ReplayComparison(
        instance_id=recorded.instance_id, repository=repository, steps=steps,
        recorded_steps=len(recorded.steps), replayed_steps=len(replayed),
        prompts_equal=(system, instance) == (recorded.system_message, recorded.instance_message),
        submission=compare_submissions(recorded.submission, replayed_submission, repository=repository),
        tree_patch=None if tree_patch is None else compare_submissions(
            replayed_submission, tree_patch, repository=repository, labels=("submission", "tree")),
        recorded_exit_status=recorded.exit_status)


#: first_divergent_step buckets of the summary's histogram (upper bounds, inclusive)
_BUCKETS = ((1, "1"), (2, "2"), (5, "3-5"), (10, "6-10"), (20, "11-20"), (50, "21-50"))


def _bucket(step: int | None) -> str:
    if step is None:
        return "none"
    return next((name for bound, name in _BUCKETS if step <= bound), f">{_BUCKETS[-1][0]}")


def _pool(comparisons: Sequence[ReplayComparison]) -> dict[str, Any]:
    compared = sum(c.steps_compared for c in comparisons)
    agreeing = sum(c.steps_agreeing for c in comparisons)
    code_steps = sum(c.returncode_steps for c in comparisons)
    code_agreeing = sum(c.returncode_steps_agreeing for c in comparisons)
    divergent = [c.first_divergent_step for c in comparisons if c.first_divergent_step is not None]
    return {
        "instances": len(comparisons),
        "same_submission": sum(c.same_submission for c in comparisons),
        "same_except_environment_artefacts": sum(c.submission.same_except_environment_artefacts
                                                 for c in comparisons),
        "steps_compared": compared,
        "steps_agreeing": agreeing,
        # pooled over steps: each step counts once, whichever instance it belongs to
        "observation_agreement": agreeing / compared if compared else None,
        "returncode_agreement": code_agreeing / code_steps if code_steps else None,
        "fully_agreeing_instances": sum(c.first_divergent_step is None for c in comparisons),
        "first_divergent_step_median": statistics.median(divergent) if divergent else None,
    }


def summarise_replays(comparisons_by_instance: Mapping[str, ReplayComparison]) -> dict[str, Any]:
    """A run's replays pooled: overall, per repository, and the first-divergence histogram."""
    comparisons = [comparisons_by_instance[k] for k in sorted(comparisons_by_instance)]
    by_repository: dict[str, list[ReplayComparison]] = {}
    for comparison in comparisons:
        by_repository.setdefault(comparison.repository, []).append(comparison)
    histogram = {name: 0 for name in [*(n for _, n in _BUCKETS), f">{_BUCKETS[-1][0]}", "none"]}
    for comparison in comparisons:
        histogram[_bucket(comparison.first_divergent_step)] += 1
    return {
        "overall": _pool(comparisons),
        "by_repository": {repo: _pool(group) for repo, group in sorted(by_repository.items())},
        "first_divergent_step_histogram": histogram,
        "differing_submissions": {
            c.instance_id: [{"path": d.path, "class": d.kind} for d in c.submission.differences]
            for c in comparisons if not c.same_submission},
    }


def _share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def render_replay_summary(summary: Mapping[str, Any]) -> str:
    """:func:`summarise_replays`' figures as Markdown (the docs' tables)."""
    lines = ["| repository | instances | same submission | same but for environment artefacts "
             "| observation agreement | return-code agreement | fully agreeing | median first divergence |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    rows = [*summary["by_repository"].items(), ("all", summary["overall"])]
    for name, row in rows:
        median = row["first_divergent_step_median"]
        lines.append(
            f"| {'**all**' if name == 'all' else name} | {row['instances']} | {row['same_submission']} "
            f"| {row['same_except_environment_artefacts']} | {_share(row['observation_agreement'])} "
            f"({row['steps_agreeing']}/{row['steps_compared']}) | {_share(row['returncode_agreement'])} "
            f"| {row['fully_agreeing_instances']} | {'–' if median is None else f'{median:g}'} |")
    histogram = summary["first_divergent_step_histogram"]
    lines += ["", "| first divergent step | " + " | ".join(histogram) + " |",
              "|---|" + "---:|" * len(histogram),
              "| instances | " + " | ".join(str(n) for n in histogram.values()) + " |"]
    differing = summary["differing_submissions"]
    if differing:
        lines += ["", "| instance | differing files |", "|---|---|"]
        for instance_id, files in differing.items():
            described = ", ".join(f"`{f['path']}` ({f['class']})" for f in files[:5])
            more = f", and {len(files) - 5} more" if len(files) > 5 else ""
            lines.append(f"| {instance_id} | {described}{more} |")
    return "\n".join(lines) + "\n"
