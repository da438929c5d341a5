"""Whether the patched tree is rebuilt in the sandbox, and what the rebuild makes the run
(pure, but for :func:`run_build_step`: the build step's one exec, through the Sandbox protocol).

A patch touching the spec's ``compiled_sources`` (``reinstall_after_patch: auto``; every
patch with ``always``) is rebuilt only where that can work and matter:

* the pristine tree holds compiled extension modules (``auto``): otherwise the tests import
  nothing built from the working copy, and a ``.c`` file a patch adds to a pure-Python
  repository changes nothing they run, so there is nothing to rebuild;
* the spec says the environment rebuilds in place (``rebuild_in_place``): the sandbox's
  environment is read-only, so a re-install into site-packages (``pip install .``, an
  editable install's metadata) can never succeed there. A patch that needs a rebuild the
  environment cannot do is INVALID ``environment_build_failed``, the harness's.

The rebuild runs the model's code (its ``setup.py``, its sources) in the **build step**
(harness/incontainer/launcher.py): as the test user, with the runtime monitor, before
anything is restored, installed or sealed. What it leaves in the working copy is then
judged again like the patch itself: the tree truth afterwards goes through
:func:`harness.integrity.plan.make_plan`, so test material it wrote is restored away, test
infrastructure it wrote restored, modules it planted that shadow others deleted, and the
seal covers the result (:func:`build_findings` names what the build itself did).

A failed rebuild is the model's only when the pristine tree rebuilds: the build step then
resets the working copy and runs the same rebuild on the pristine tree. When that fails too,
the environment cannot rebuild (``environment_build_failed``, the harness's), whatever the
patch added.
"""

from __future__ import annotations

import fnmatch
import io
import time
from dataclasses import dataclass

from typing import Callable

from harness.engine import archive
from harness.engine.exec_session import ExecSession
from harness.engine.sandbox import ExecResult, Sandbox
from harness.errors import ContainerDied, PatchRejected, RebuildFailed, build_failure_excerpt
from harness.inputs.specs import EnvSpec
from harness.integrity import steps
from harness.integrity.evidence import judge_evidence, parse_evidence
from harness.integrity.plan import Plan
from harness.integrity.tree import MalformedTreeReport, TreeTruth, parse_tree_report


@dataclass(frozen=True)
class RebuildDecision:
    """``run``: the build step runs; ``why``: the reason either way (recorded in the report)."""

    run: bool
    why: str


def compiled_touched(spec: EnvSpec, paths: list[str] | tuple[str, ...]) -> list[str]:
    return sorted(p for p in paths if any(fnmatch.fnmatchcase(p.rsplit("/", 1)[-1], pattern)
                                          for pattern in spec.compiled_sources))


def decide(spec: EnvSpec, model_files: list[str], pristine_extensions: int | None) -> RebuildDecision:
    """Whether to rebuild after a patch changing ``model_files``. Raises RebuildFailed (the
    harness's) when the patch needs a rebuild this environment cannot do."""
    if not spec.reinstall_needed(model_files):
        return RebuildDecision(False, "")
    touched = compiled_touched(spec, model_files)
    if spec.reinstall_after_patch == "auto" and not pristine_extensions:
        return RebuildDecision(False, f"the patch touches compiled sources ({', '.join(touched[:5])}) but the "
                                      "pristine tree holds no compiled extension module: nothing to rebuild")
    if not spec.rebuild_in_place:
        raise RebuildFailed(f"the patch touches compiled sources ({', '.join(touched[:5])}) of a tree with compiled "
                            "extensions, and the environment cannot rebuild in place (spec rebuild_in_place: false)",
                            reason="environment_build_failed", origin="harness")
    if spec.compiler == "build":
        raise RebuildFailed("the patch touches compiled sources but the test image has no compiler "
                            "(spec compiler: build; use compiler: keep)", reason="environment_build_failed",
                            origin="harness")
    what = f"the patch touches compiled sources ({', '.join(touched[:5])})" if touched else \
        "reinstall_after_patch: always"
    return RebuildDecision(True, f"{what}: rebuilt in place before the seal")


def outcome(record: dict, command: str, timeout: int) -> RebuildFailed | None:
    """What the build step's record (``build.json``) makes the run: None when the rebuild
    succeeded; the model's failure when only the patched tree fails to build; the
    environment's when the pristine tree does not rebuild either."""
    build = record.get("build") if isinstance(record.get("build"), dict) else {}
    if build.get("exit_code") == 0 and not build.get("timed_out"):
        return None
    commands = [c for c in record.get("commands") or [] if isinstance(c, dict)]
    step = next((c for c in commands if c.get("phase") == "build"), {})
    timed_out = bool(build.get("timed_out"))
    what = f"exceeded {timeout} s" if timed_out else f"failed (exit {build.get('exit_code')})"
    detail = f"re-install `{command}` {what}: {build_failure_excerpt(str(step.get('output_tail') or ''))}"
    pristine = record.get("pristine_build") if isinstance(record.get("pristine_build"), dict) else None
    if pristine is None or pristine.get("exit_code") != 0 or pristine.get("timed_out"):
        again = "did not run" if pristine is None else (
            "timed out" if pristine.get("timed_out") else f"exit {pristine.get('exit_code')}")
        return RebuildFailed(f"{detail}; the same rebuild of the pristine tree fails too ({again}): the "
                             "environment cannot rebuild", reason="environment_build_failed", origin="harness")
    return RebuildFailed(detail + "; the pristine tree rebuilds", reason="timeout" if timed_out else "rebuild_failed")


@dataclass
class BuildFindings:
    """What the build itself did to the working copy (beyond the patch): flags and details."""

    flags: list[str]
    details: dict


def build_findings(before: TreeTruth, after: TreeTruth, patch_plan: Plan, plan: Plan) -> BuildFindings:
    """Compare the tree truth and the plan before the rebuild with those after it."""
    seen = {(c.path, c.change, c.sha256) for c in before.changes}
    changed = sorted(c.path for c in after.changes if (c.path, c.change, c.sha256) not in seen)
    flags, details = [], {"build_changes": changed[:200], "build_change_count": len(changed)}
    for flag, then, now in (("build_touched_tests", patch_plan.touched_tests, plan.touched_tests),
                            ("build_touched_test_infra", patch_plan.touched_infra, plan.touched_infra),
                            ("build_shadows_module", patch_plan.shadows, plan.shadows)):
        extra = sorted(set(now) - set(then))
        if extra:
            flags.append(flag)
            details[flag] = extra[:100]
    return BuildFindings(flags, details)


def run_build_step(sandbox: Sandbox, session: ExecSession, layout: steps.Layout, spec: EnvSpec,
                   env: dict[str, str], config, record: Callable) -> dict[str, bytes]:
    """The build step's plan to the session's launcher, its answer, its output directory
    back. ``env`` is the scrubbed environment; the rebuild gets the monitor's bootstrap on
    top (the pristine tree's retry runs without). ``record(phase, argv, result)`` keeps the
    step."""
    argv = ["/bin/bash", "-c", spec.reinstall_command]
    limits = {"max_changes": config.max_tree_changes, "content_limit": 0, "content_total": 0}
    launch = steps.build_plan(layout, argv, env, steps.bootstrap(None, config.monitor), spec.reinstall_timeout,
                              config.setup_timeout, limits)
    started = time.monotonic()
    session.send(steps.plan_message(launch))
    answer = session.receive(config.tree_report_limit + 48 * 1024 * 1024,
                             timeout=2 * spec.reinstall_timeout + 2 * config.setup_timeout + 60)
    res = ExecResult(session.argv, 0 if answer.ok else None,
                     "" if answer.ok else answer.body[-4000:].decode("utf-8", "replace"),
                     time.monotonic() - started, answer.timed_out, answer.truncated,
                     killed=answer.timed_out or answer.truncated or bool(answer.malformed))
    record("build_step", session.argv, res)
    limit = config.tree_report_limit + 32 * 1024 * 1024
    sent = None if res.killed else archive.regular_files(io.BytesIO(answer.body), limit)
    out = None if res.killed else (sent if sent and "build.json" in sent else sandbox.get_files(layout.out_dir, limit))
    if out is None or "build.json" not in out:
        raise ContainerDied(f"the build step left no record: {answer.malformed or res.output[-800:]}")
    return out


@dataclass
class AfterBuild:
    """The build step judged: its commands (for the report), flags and details, and either
    the failure that decides the run or the plan decided again from the rebuilt tree."""

    commands: list[dict]
    flags: list[str]
    details: dict
    failure: RebuildFailed | None = None
    plan: Plan | None = None


def after_build(out: dict[str, bytes], before: TreeTruth, patch_plan: Plan, spec: EnvSpec, report_limit: int,
                max_changes: int, replan: Callable[[TreeTruth], Plan]) -> AfterBuild:
    """Judge the build step's output directory (``build.json``, ``build-events.jsonl``,
    ``tree.json``); ``replan`` decides the plan from a tree truth as for the patch."""
    record = parse_evidence(out["build.json"], None).launcher or {}
    commands = [c for c in record.get("commands") or [] if isinstance(c, dict)]
    # what the build's own code did, as the monitor saw it (flags only: its tree is judged below)
    seen = judge_evidence(parse_evidence(None, out.get("build-events.jsonl", b"")), {}, (),
                          frozenset(patch_plan.model_files), True, spec.runner_internals_allowed, False)
    flags = ["build_" + f for f in seen.flags]
    details = {"build_monitor": seen.details["monitor"]} if seen.details.get("monitor") else {}
    failure = outcome(record, spec.reinstall_command, spec.reinstall_timeout)
    if failure is not None:
        return AfterBuild(commands, flags, details, failure)
    try:
        after = parse_tree_report(out.get("tree.json", b"").decode("utf-8", "replace"), report_limit)
    except MalformedTreeReport as exc:
        raise ContainerDied(f"the tree report after the rebuild failed: {exc}") from None
    if after.too_many_changes:
        raise PatchRejected(f"the patch and its rebuild change more than {max_changes} paths")
    if after.symlinks:
        raise PatchRejected(f"symlinks are not accepted (the rebuild made them): {after.symlinks[:5]}")
    plan = replan(after)
    found = build_findings(before, after, patch_plan, plan)
    return AfterBuild(commands, flags + found.flags, {**details, **found.details}, None, plan)
