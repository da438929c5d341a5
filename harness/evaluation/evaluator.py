"""The grading sequence for one (instance, prediction), in this order:

1. validate on the host: the model patch (size, text, paths, counts; what carries nothing
   to apply, a content-less binary stub or a new symlink inside the repository, is taken
   out and flagged: :func:`harness.patches.prepare_model_patch`) and the test patch,
   applied on the host over the pristine files it touches (the test files to run);
2. start a fresh sandbox (no network; its first process fills the working copy from the
   pristine tree as the test user meanwhile); **one exec** then runs steps 3 to 7, the host
   talking to it (:mod:`harness.engine.exec_session`): its first message puts the model patch,
   the harness's trusted in-container files and the staged test files in place;
3. **set-up step** (as the test user): the working copy as the pristine tree has it, the
   history check, apply the model patch (``git apply``, ``--3way``, ``patch
   --fuzz``; then the same without the hunks the tree already holds, flagged), check
   ``.git`` is untouched, and report the *tree truth*;
4. on the host, from the tree truth: reject what must never run (``.git`` changed,
   symlinks, a tree the parsed patch does not explain, compiled code and archives, files
   too large to inspect), decide what to restore, delete and seal, scan the model's
   files (every one, whatever its name), plant the canaries;
5. **build step**, only when the patch needs a rebuild the environment can do in place
   (:mod:`harness.integrity.rebuild`; as root, the rebuild as the test user with
   the monitor): the rebuild under its own timeout (a failed rebuild is graded, the old
   binaries are never tested), then the tree truth again; the host decides restores,
   deletions and the seal again from it;
6. **test step** (its plan sent to the exec; as root, everything of the model as the test user with no
   capability): delete, restore, install the test files, remove stray bytecode, seal,
   start the services, run the tests under a timeout, fingerprint the sealed files again
   and survey what the tests created;
7. the exec's last message carries the evidence and the results file out (an archive read
   when it did not come); the sandbox is released (removed in the background,
   :mod:`harness.engine.reaper`);
8. judge on the host (:mod:`harness.integrity.judge`): parse, canaries, evidence, grade.

Nothing here talks to Docker directly: it sees a :class:`~harness.engine.sandbox.Sandbox`.
The defences themselves live in :mod:`harness.integrity`.
"""

from __future__ import annotations

import secrets
import time
from typing import Callable

from harness.engine.exec_session import HEADER_LIMIT, ExecSession
from harness.engine.sandbox import ROOT, ExecResult, Sandbox
from harness.errors import (ContainerDied, GradingOutcome, InfrastructureError, PatchApplyFailed, PatchRejected,
                            ServiceUnavailable)
from harness.evaluation.setup import (BASE_ENV, EvalConfig, Evaluation, RunOutputs, build_test_command,
                                      draw_hash_seed, emits_evidence, is_pytest, sandbox_cpu, scrubbed_env)
from harness.grading.conventions import get_convention
from harness.grading.status import ErrorReason, InstanceStatus
from harness.grading.verdict import settle_origin
from harness.inputs.instances import Instance
from harness.inputs.predictions import Prediction
from harness.inputs.specs import EnvSpec
from harness.integrity import artefacts, rebuild, steps
from harness.integrity import canaries as canary_mod
from harness.integrity.declared import Declarations
from harness.integrity.evidence import parse_evidence
from harness.integrity.judge import RunContext, apply_judgement, invalidate, judge_run, refuse_runner_reach
from harness.integrity.plan import Plan, make_plan
from harness.integrity.scan import scan_changes
from harness.integrity.testpatch import TestPatchResult, apply_test_patch
from harness.integrity.tree import MalformedTreeReport, TreeTruth, disagreement, parse_tree_report, step_phases
from harness.overlap import Background
from harness.patches import ModelPatch, PatchFiles, patch_files, prepare_model_patch
from harness.results.report import CommandRecord, InstanceResult
from harness.runners import Runner, get_runner

#: Pristine bytes and mode of a path at the base commit, or None if it did not exist.
PristineSource = Callable[[str], "tuple[bytes, int] | None"]

class Evaluator:
    """Runs the sequence above. One instance per (instance, prediction); no shared state."""

    def __init__(self, instance: Instance, prediction: Prediction, spec: EnvSpec,
                 pristine: PristineSource, config: EvalConfig,
                 protected_modules: frozenset[str] = frozenset(),
                 pristine_paths: Callable[[], frozenset[str]] = frozenset,
                 control_skipped: frozenset[str] = frozenset(),
                 canary_plan: canary_mod.CanaryPlan | None = None,
                 reference_undeclared: dict[str, str] | None = None) -> None:
        self.protected_modules = protected_modules
        #: the undeclared outcomes the reference control showed (harness/integrity/judge.py)
        self.reference_undeclared = reference_undeclared
        self.pristine_paths = pristine_paths
        self.control_skipped = control_skipped
        self.instance = instance
        self.prediction = prediction
        self.spec = spec
        self.pristine = pristine
        self.config = config
        self.runner: Runner = get_runner(spec.runner)
        self.env = scrubbed_env(spec, draw_hash_seed() if config.hash_seed is None else config.hash_seed)
        self.result = InstanceResult(
            instance_id=instance.instance_id, repo=instance.repo,
            model_name_or_path=prediction.model_name_or_path, status=InstanceStatus.INVALID,
            attempt=prediction.attempt, parser=spec.parser, runner=spec.runner, id_convention=spec.id_convention,
            patch_is_None=prediction.model_patch is None, patch_exists=not prediction.is_empty,
            checksums={"instance": instance.checksum(), "patch": prediction.checksum(),
                       "spec": spec.checksum()},
            **prediction.usage(),
            resources={"python_hash_seed": self.env["PYTHONHASHSEED"]},
        )
        if spec.service_hosts:   # the network names a local stand-in answers for (the comparison reads them)
            self.result.integrity_details["network_stand_ins"] = sorted(spec.service_hosts)
        self.outputs = RunOutputs(patch=prediction.model_patch or "")
        self.canaries: list[canary_mod.Canary] = []
        #: what the pristine tests declare (read from the staged test files and the pristine tree)
        self.declarations: Declarations | None = None
        self.perturbations: list[canary_mod.Canary] = []
        self.canary_plan = canary_plan or canary_mod.CanaryPlan(secrets.randbits(63), config.canaries)
        #: canary test id -> PROVEN/DISPROVED by the reference control
        self.canary_proof: dict[str, str] = {}
        #: what judging read (evidence, test files, plan, the flags set before), to judge again
        self._judged_with: tuple | None = None

    # ----------------------------------------------------------------- helpers
    def _phase(self, name: str, started: float) -> None:
        self.result.timings[name] = round(self.result.timings.get(name, 0.0) + time.monotonic() - started, 4)

    @property
    def _out_limit(self) -> int:
        """What the test step's output directory may hold (the results file and the evidence)."""
        return self.config.junit_limit + 32 * 1024 * 1024

    def _step_phases(self, step: str, phases: dict[str, float]) -> None:
        """The in-sandbox parts of a step (what its fixed cost is made of: benchmarks/overhead.py)."""
        if phases:
            self.result.resources.setdefault("step_seconds", {})[step] = phases

    def _record(self, phase: str, argv: list[str], res: ExecResult | dict) -> None:
        if isinstance(res, dict):
            self.result.commands.append(CommandRecord(
                phase=res.get("phase", phase), argv=list(res.get("argv") or argv), exit_code=res.get("exit_code"),
                duration=float(res.get("duration") or 0.0), timed_out=bool(res.get("timed_out")),
                output_tail=str(res.get("output_tail") or "")[-4000:]))
            return
        self.result.commands.append(CommandRecord(
            phase=phase, argv=argv, exit_code=res.exit_code, duration=round(res.duration, 4),
            timed_out=res.timed_out, truncated=res.truncated, output_tail=res.output[-4000:]))

    # ----------------------------------------------------------------- sequence
    def run(self, start_sandbox: Callable[[], Sandbox]) -> Evaluation:
        """Evaluate. Grading outcomes become the verdict; InfrastructureError propagates
        (the caller may retry) after the sandbox is closed."""
        t0 = time.monotonic()
        try:
            test_patch = patch_files(self.instance.test_patch)
            model = prepare_model_patch(self.prediction.model_patch or "")
            self._record_dropped(model)
            test_result = apply_test_patch(self.instance.test_patch, test_patch, self.pristine)
        except GradingOutcome as outcome:
            evaluation = self._invalid(ErrorReason(outcome.reason), str(outcome))
            settle_origin(self.result, self.is_reference)
            return evaluation
        self._phase("validate", t0)

        # the engine starts the container while the host plants the canaries (harness.overlap)
        t = time.monotonic()
        starting = Background(start_sandbox, "sandbox-start")
        try:
            test_files = self.runner.test_files(test_patch)
            staged = self._plant_canaries(test_result, test_files)
        except BaseException:
            starting.discard(lambda sandbox: sandbox.release())
            raise
        self._phase("canaries", t)
        t = time.monotonic()
        sandbox = starting.result()
        self.result.resources["cpus"] = sandbox.cpu.as_dict()
        self._phase("start", t)
        try:
            self._sequence(sandbox, test_patch, model, test_result, test_files, staged)
        except GradingOutcome as outcome:
            self._finish_invalid(ErrorReason(outcome.reason), str(outcome))
        finally:
            t = time.monotonic()
            sandbox.release()   # removed off the critical path (harness.engine.reaper)
            self._phase("cleanup", t)
            self.result.timings["total"] = round(time.monotonic() - t0, 4)
        settle_origin(self.result, self.is_reference)
        return Evaluation(self.result, self.outputs)

    @property
    def is_reference(self) -> bool:
        """The prediction is the instance's own reference patch (read from the bytes, not
        from the model's name)."""
        return self.prediction.model_patch == self.instance.patch

    def _sequence(self, sandbox: Sandbox, test_patch: PatchFiles, model: ModelPatch,
                  test_result: TestPatchResult, test_files: list[str], staged: dict[str, tuple[bytes, int]]) -> None:
        layout = steps.Layout.new()

        # 2-3. inputs in, set-up step
        t = time.monotonic()
        # what the sandbox applies: the patch less what carries nothing (harness.patches)
        patch_bytes = None if not model.text.strip() else model.text.encode("utf-8")
        sections = [s.as_json() for s in model.sections] if model.sections else None
        # every added or modified file comes back up to the inspection limits (a file past
        # them comes back without its content, and the patch is refused: _decide)
        limits = {"max_changes": self.config.max_tree_changes, "content_limit": artefacts.FILE_LIMIT,
                  "content_total": artefacts.TOTAL_LIMIT}
        inputs = steps.initial_files(layout, patch_bytes, self.env, self.config.setup_timeout, limits, staged,
                                     sections, sandbox.early_marker)
        # one exec from the inputs to the end of the tests (harness.engine.exec_session): the
        # inputs are its first message, the set-up step's report its first answer
        argv = steps.session_argv(layout, self.config.setup_timeout * 4, self.config.tree_report_limit,
                                  self.env.get("PATH"))
        session = sandbox.session(argv, user=ROOT, cap=self.config.test_output_limit + HEADER_LIMIT,
                                  message_cap=max(self.config.tree_report_limit, self._out_limit) + (2 << 20))
        try:
            session.send(steps.inputs_message(inputs))
            res = self._set_up_report(session, steps.prepare_argv(layout))
            self._record("prepare", res.argv, res)
            try:
                tree = self._tree_truth(res, nothing_to_apply=patch_bytes is None)
            finally:
                self._phase("setup", t)

            # 4. decisions on the host
            t = time.monotonic()
            patch_plan = self._decide(tree, model.files, test_patch, test_files)
            # the scans only flag and judge; they never change what runs: done while the tests run
            scanning = Background(lambda: self._scan(tree, patch_plan), "scan")
            self._phase("plan", t)

            # 5-6. the build step (when it runs) and the test step (the scan runs meanwhile, and has
            # finished before anything is recorded)
            try:
                plan = self._build_step(sandbox, session, layout, tree, patch_plan, test_patch, test_files)
                t = time.monotonic()
                argv, res, command, timeout = self._test_step(sandbox, session, layout, plan, test_patch,
                                                              test_result, staged)
                # the output directory as the launcher sent it (None: the host reads it itself)
                collected = None if res.killed else steps.received_files(session, self._out_limit, "tests")
            finally:
                scanning.discard(lambda _: None)  # never left running past this step
        finally:
            session.close()
        scanning.result()
        self._record("launch", argv, res)
        self.result.commands[-1].output_tail = ""  # the test output is kept in full beside the report
        self.outputs.test_output = res.output
        self._phase("tests", t)

        # 7. collect
        t = time.monotonic()
        out = None if res.killed else (collected or sandbox.get_files(layout.out_dir, self._out_limit))
        self._phase("copy_out", t)

        t = time.monotonic()
        if res.truncated:
            self._record("tests", ["/bin/bash", "-c", command], res)
            return self._finish_invalid(ErrorReason.OUTPUT_LIMIT_EXCEEDED,
                                        f"test output exceeded {self.config.test_output_limit} bytes")
        if res.timed_out:
            self._record("tests", ["/bin/bash", "-c", command], res)
            return self._finish_invalid(ErrorReason.TIMEOUT, f"tests exceeded {timeout} s")
        if res.killed:
            raise ContainerDied("container killed during the test run")
        if out is None or steps.EVIDENCE_NAME not in out:
            raise ContainerDied(f"the test step left no evidence (exit {res.exit_code}): {res.output[-800:]}")
        self.outputs.evidence, self.outputs.events = out[steps.EVIDENCE_NAME], out.get(steps.EVENTS_NAME, b"")
        self.outputs.junit_xml = out.get("results")
        evidence = parse_evidence(self.outputs.evidence, self.outputs.events)
        self._step_phases("launch", step_phases((evidence.launcher or {}).get("phases")))
        self._absorb_launcher(evidence.launcher or {}, command)
        tests = (evidence.launcher or {}).get("tests") or {}
        if tests.get("timed_out"):
            return self._finish_invalid(ErrorReason.TIMEOUT, f"tests exceeded {timeout} s")
        self._grade(evidence, test_files, plan)
        self._phase("grade", t)

    # ----------------------------------------------------------------- steps
    def _plant_canaries(self, test_result: TestPatchResult, test_files: list[str]) -> dict[str, tuple[bytes, int]]:
        planted = canary_mod.stage(self.canary_plan, dict(test_result.files), test_files, self.pristine,
                                   self.runner, self.instance.fail_to_pass, get_convention(self.spec.id_convention))
        self.canaries, self.perturbations, self.canary_proof = planted.canaries, planted.perturbations, planted.proof
        self.result.integrity_details.update(planted.details)
        self.result.integrity_flags += planted.flags
        # the tests as they are installed, canaries included, and the pristine tree around them
        self.declarations = Declarations({p: data for p, (data, _) in planted.files.items()}, self._pristine_bytes,
                                         self.spec.runner, self.pristine_paths())
        return planted.files

    def _record_dropped(self, model: ModelPatch) -> None:
        """What was taken out of the patch before it was applied: flags, never a verdict."""
        details, flags = self.result.integrity_details, self.result.integrity_flags
        stubs, links = model.dropped_of("binary_stub"), model.dropped_of("symlink")
        if stubs:
            flags.append("patch_binary_stub_dropped")
            details["binary_stubs_dropped"] = [{"path": d.path, "line": d.detail} for d in stubs[:100]]
        if links:
            flags.append("patch_symlink_dropped")
            details["symlinks_dropped"] = [{"path": d.path, "target": d.detail} for d in links[:100]]

    def _set_up_report(self, session: ExecSession, argv: list[str]) -> ExecResult:
        """The set-up step's report, the session's first message, as the result of the command
        that wrote it (what :meth:`_tree_truth` reads)."""
        limit = self.config.tree_report_limit
        message = session.receive(limit, timeout=self.config.setup_timeout * 4 + 60)
        if message.malformed or message.eof:
            raise ContainerDied(f"the set-up step ended without its report ({message.malformed or 'no message'}): "
                                f"{message.body[-1500:].decode('utf-8', 'replace')}")
        return message.as_result(argv)

    def _tree_truth(self, res: ExecResult, nothing_to_apply: bool = False) -> TreeTruth:
        if res.truncated:
            raise PatchRejected(f"the patched tree's report is over {self.config.tree_report_limit} bytes")
        if res.killed and not res.timed_out:
            raise ContainerDied("container killed during the set-up step")
        if res.timed_out:
            raise PatchApplyFailed("applying the model patch did not finish in time")
        try:
            tree = parse_tree_report(res.output, self.config.tree_report_limit)
        except MalformedTreeReport as exc:
            raise ContainerDied(f"the set-up step failed: {exc}") from None
        for command in tree.commands:
            self._record(command.get("phase", "setup"), command.get("argv") or [], command)
        self._step_phases("prepare", tree.phases)
        self.result.integrity_details["history_commits"] = tree.history_commits
        if tree.history_commits != 1:
            self.result.integrity_flags.append("history_not_stripped")
        if self.prediction.is_empty:
            self.result.patch_successfully_applied = False
            return tree
        if nothing_to_apply:   # every section carried nothing (harness.patches.prepare_model_patch)
            self.result.patch_successfully_applied = True
            self.result.apply_strategy = "nothing_left"
            return tree
        if tree.applied is None:
            tails = [f"{c.get('phase')}: {str(c.get('output_tail'))[-600:]}" for c in tree.commands
                     if str(c.get("phase", "")).startswith("apply:")]
            raise PatchApplyFailed("no strategy applied the model patch:\n" + "\n".join(tails))
        self.result.patch_successfully_applied = True
        self.result.apply_strategy = tree.applied
        if tree.already_present:
            self.result.integrity_flags.append("patch_hunks_already_present")
            self.result.integrity_details["hunks_already_present"] = tree.already_present[:100]
        return tree

    def _decide(self, tree: TreeTruth, model_files: PatchFiles, test_patch: PatchFiles,
                test_files: list[str]) -> Plan:
        """Reject what must never run; then what to restore, delete and seal; then scan."""
        details = self.result.integrity_details
        if tree.git_changed:
            details["git_changed"] = tree.git_changed[:50]
            raise PatchRejected(f"applying the patch changed .git: {tree.git_changed[:5]}")
        if tree.too_many_changes:
            raise PatchRejected(f"the patch changes more than {self.config.max_tree_changes} paths")
        if tree.symlinks:
            details["symlinks"] = tree.symlinks[:50]
            raise PatchRejected(f"symlinks are not accepted: {tree.symlinks[:5]}")
        if not self.prediction.is_empty:
            differ = disagreement(model_files, tree)
            if differ:
                details["patch_disagreement"] = differ
                raise PatchRejected("the patch text and the patched tree disagree on the files it touches: "
                                    f"only in the tree {differ['only_in_tree'][:5]}, "
                                    f"only in the parsed patch {differ['only_in_parsed_patch'][:5]}")
        # every byte the model adds is inspected or refused: compiled code, archives and
        # files too large to read are refused before anything of the model runs
        refused = artefacts.refusal(tree.changes)
        if refused:
            details["uninspectable"] = refused.details()
            raise PatchRejected(refused.message())
        plan = make_plan(tree, test_patch.all, test_files, self.pristine_paths(), self.protected_modules,
                         self.config.restore_test_infra, self.runner.infra_patterns, self._pristine_bytes)
        for flag, paths in (("patch_touched_tests", plan.touched_tests), ("patch_touched_test_infra",
                                                                           plan.touched_infra),
                            ("patch_shadows_module", plan.shadows)):
            if paths:
                self.result.integrity_flags.append(flag)
                details[flag] = paths[:100]
        details["model_files"] = plan.model_files[:500]
        details["forbid_runner_internals"] = self.config.forbid_runner_internals
        return plan

    def _pristine_bytes(self, path: str) -> bytes | None:
        found = self.pristine(path)
        return found[0] if found is not None else None

    def _scan(self, tree: TreeTruth, plan: Plan) -> None:
        found = scan_changes(tree.existing_changed, set(plan.model_files), self.pristine, self.runner.internals)
        hits, tokenized = found.hits, found.tokenized
        details, flags = self.result.integrity_details, self.result.integrity_flags
        if tokenized:
            flags.append("scan_tokenized")
            details["scan_tokenized"] = tokenized[:50]
        if hits:
            details["scan"] = [str(h) for h in sorted(hits, key=lambda h: not h.tampers)[:50]]
            for category in sorted({h.category for h in hits}):
                flags.append(f"patch_{category}")
            runner = [str(h) for h in hits if h.tampers]
            if runner:
                flags.append("patch_references_test_runner")
                details["patch_references_test_runner"] = runner[:20]

    def _launch_plan(self, layout: steps.Layout, plan: Plan, test_result: TestPatchResult,
                     staged: dict[str, tuple[bytes, int]], command: str, timeout: int, bootstrap: dict) -> dict:
        spec = self.spec
        services = [{"name": s.name, "setup": list(s.setup), "command": s.command, "ready": list(s.ready),
                     "ready_timeout": s.ready_timeout,
                     "env": {**BASE_ENV, "PATH": f"{s.venv}/bin:{BASE_ENV['PATH']}", **dict(s.env)}}
                    for s in spec.services]
        tests = {"argv": ["/bin/bash", "-c", command], "env": self.env, "timeout": timeout, "run_dir": layout.run_dir,
                 "results_name": steps.RESULTS_NAME, "results_limit": self.config.junit_limit,
                 "bootstrap": bootstrap}
        return steps.launch_plan(layout, plan, sorted({*plan.delete, *test_result.deleted}), staged, services,
                                 tests, self.config.setup_timeout, BASE_ENV)

    def _build_step(self, sandbox: Sandbox, session: ExecSession, layout: steps.Layout, tree: TreeTruth, plan: Plan,
                    test_patch: PatchFiles, test_files: list[str]) -> Plan:
        """The rebuild before the seal, when :func:`rebuild.decide` says so; returns the plan
        decided again from what the patch and the build left (the patch's plan otherwise)."""
        spec, details = self.spec, self.result.integrity_details
        decision = rebuild.decide(spec, plan.model_files, tree.pristine_extensions)
        if decision.why:
            details["rebuild"] = decision.why
        if not decision.run:
            return plan
        t = time.monotonic()
        out = rebuild.run_build_step(sandbox, session, layout, spec, self.env, self.config, self._record)
        result = rebuild.after_build(out, tree, plan, spec, self.config.tree_report_limit, self.config.max_tree_changes,
                                     lambda after: make_plan(after, test_patch.all, test_files, self.pristine_paths(),
                                                             self.protected_modules, self.config.restore_test_infra,
                                                             self.runner.infra_patterns, self._pristine_bytes))
        for step in result.commands:
            self._record(str(step.get("phase")), [], step)
        self._phase("rebuild", t)
        self.result.integrity_flags.extend(result.flags)
        details.update(result.details)
        if result.failure is not None:
            raise result.failure
        return result.plan

    def _test_step(self, sandbox: Sandbox, session: ExecSession, layout: steps.Layout, plan: Plan,
                   test_patch: PatchFiles, test_result: TestPatchResult, staged: dict[str, tuple[bytes, int]]):
        """The plan to the session's launcher, which runs the test step. Returns (argv, its
        result, the test command, the timeout)."""
        timeout = self.config.timeout or self.spec.timeout
        results_path = f"{layout.run_dir}/{steps.RESULTS_NAME}"
        plugin = self.config.monitor and is_pytest(self.spec)
        command = build_test_command(self.spec, test_patch, results_path, plugin)
        launch = self._launch_plan(layout, plan, test_result, staged, command, timeout,
                                   steps.bootstrap(results_path, self.config.monitor))
        session.send(steps.plan_message(launch))
        deadline = timeout + self.config.setup_timeout + 60 + sum(
            s.ready_timeout + self.config.setup_timeout * len(s.setup) for s in self.spec.services)
        res = session.finish(deadline, self.config.test_output_limit)
        return session.argv, res, command, timeout

    def _absorb_launcher(self, launcher: dict, command: str) -> None:
        for step in launcher.get("commands") or []:
            self._record(str(step.get("phase")), [], step)
        if launcher.get("service_failure"):
            raise ServiceUnavailable(str(launcher["service_failure"])[:2000])
        tests = launcher.get("tests") or {}
        self.result.commands.append(CommandRecord(
            phase="tests", argv=["/bin/bash", "-c", command], exit_code=tests.get("exit_code"),
            duration=float(tests.get("duration") or 0.0), timed_out=bool(tests.get("timed_out")),
            output_tail=self.outputs.test_output[-4000:]))
        self.result.test_exit_code = tests.get("exit_code")
        details = self.result.integrity_details
        for key in ("deleted", "restored", "delete_errors", "seal_errors"):
            if launcher.get(key):
                details[f"sandbox_{key}"] = launcher[key][:100]
        details["sealed_count"] = launcher.get("sealed_count")
        if (launcher.get("bytecode_removed") or {}).get("count"):
            details["bytecode_removed"] = launcher["bytecode_removed"]
        if launcher.get("expected_mismatch"):
            raise InfrastructureError(f"test files did not land as written: {launcher['expected_mismatch'][:5]}")

    def _grade(self, evidence, test_files: list[str], plan: Plan) -> None:
        if self._judged_with is None:
            self._judged_with = (evidence, test_files, plan, list(self.result.integrity_flags))
        expected = self.config.monitor and emits_evidence(self.spec)
        self.result.integrity_details["evidence_expected"] = expected  # so that a re-grade judges alike
        ctx = RunContext(test_files=tuple(test_files), canaries=tuple(self.canaries), canary_proof=self.canary_proof,
                         reference=self.is_reference, perturbations=tuple(self.perturbations),
                         model_files=frozenset(plan.model_files), runner_project=self.spec.runner_internals_allowed,
                         plugin_expected=expected, control_skipped=self.control_skipped, evidence=evidence,
                         cpu=sandbox_cpu(self.result), declarations=self.declarations,
                         reference_undeclared=self.reference_undeclared)
        judged = judge_run(self.instance, self.spec.parser, self.outputs.test_output, self.outputs.junit_xml,
                           self.result.test_exit_code, ctx, convention=self.spec.id_convention)
        if judged.infrastructure:
            raise InfrastructureError(judged.infrastructure)
        apply_judgement(self.result, judged)
        refuse_runner_reach(self.result, self.instance.tests, self.config.forbid_runner_internals)

    def reprove(self, proof: dict[str, str], source: dict, reference_undeclared: dict[str, str] | None = None) -> None:
        """Judge the finished run again, its canaries proven by a run of the reference patch
        that planted the same ones (``source`` says which, recorded as ``canary_control``),
        and with the undeclared outcomes that run showed (None: it showed nothing usable)."""
        if self._judged_with is None:
            return
        evidence, test_files, plan, before = self._judged_with
        if reference_undeclared is not None:
            self.reference_undeclared = dict(reference_undeclared)
        self.canary_proof = dict(proof)
        self.result.integrity_details["canary_proof"] = dict(proof)
        self.result.integrity_details["canary_control"] = source
        self.result.integrity_flags = list(before)
        self._grade(evidence, test_files, plan)
        settle_origin(self.result, self.is_reference)

    def _invalid(self, reason: ErrorReason, detail: str) -> Evaluation:
        self._finish_invalid(reason, detail)
        return Evaluation(self.result, self.outputs)

    def _finish_invalid(self, reason: ErrorReason, detail: str) -> None:
        invalidate(self.result, self.instance.tests, reason, detail)
