"""The grading sequence for one (instance, prediction), in this order:

1. validate the model patch on the host (size, binary hunks, paths) — before anything runs;
2. start a fresh sandbox from the instance image (no network) and copy the pristine tree
   into the working copy;
3. apply the model patch: ``git apply``, then ``git apply --3way``, then
   ``patch --fuzz``, restoring the pristine tree between tries; record which applied;
4. restore, from the harness's own pristine copy (the source repository on the host),
   every file the test patch touches and every test-infrastructure file the model patch
   touches; delete the ones that did not exist at the base commit;
5. apply the test patch (``--check`` first; failure is the instance's fault, loud);
6. re-install the package when the spec says so or the patch touches compiled
   sources (a checked step with its own timeout: a failed rebuild is graded, never
   tested on the old binaries);
7. run the test command under a timeout enforced inside (``timeout``) and from the host
   (kill + remove); output is capped;
8. copy the structured results out, close the sandbox;
9. parse and grade on the host.

Nothing here talks to Docker directly: it sees a :class:`~harness.engine.sandbox.Sandbox`.
"""

from __future__ import annotations

import posixpath
import re
import secrets
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

from harness import incontainer
from harness.engine.images import PRISTINE_TREE, VENV
from harness.engine.sandbox import ROOT, SERVICE_USER, ExecResult, Sandbox
from harness.errors import (ContainerDied, GradingOutcome, PatchApplyFailed, PatchRejected, RebuildFailed,
                            ServiceUnavailable, TestPatchApplyFailed)
from harness.grading.conventions import IdKind, get_convention, map_results
from harness.grading.grade import Grade, TestLists, grade
from harness.grading.origins import evidence_origin
from harness.grading.parsers import RunArtefacts, get_parser
from harness.grading.reporter_parsers import junit_collection_errors
from harness.grading.status import ErrorReason, InstanceStatus, TestStatus
from harness.instances import Instance
from harness.patches import PatchFiles, check_model_patch, matches_any, patch_files
from harness.predictions import Prediction
from harness.report import CommandRecord, InstanceResult
from harness.runners import Runner, get_runner
from harness.specs import EnvSpec

#: Files that steer the test runner; a model patch may not change them (restored from
#: the pristine copy before the test patch is applied).
TEST_INFRA_PATTERNS = ("conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini",
                       "setup.cfg", "pyproject.toml", "noxfile.py", "sitecustomize.py", "usercustomize.py",
                       "*.pth")
#: Added lines that reach into the test runner from the code under test (a plugin
#: registered from library code, forged reports, a hard exit). A fix to a library has no
#: business doing this; specs of test-runner projects turn the check off.
RUNNER_INTERNALS = re.compile(
    r"\b_pytest\b|pluginmanager|hookimpl|pytest_runtest_|pytest_collection|pytest_configure|"
    r"pytest_sessionfinish|pytest_terminal_summary|pytest_report|gc\.get_objects|junitxml|os\._exit|"
    r"sys\.__stdout__|sys\.stdout\s*=|sys\.modules\[\s*['\"]_?pytest")
#: Top-level names in the repository that would shadow the runner itself.
ROOT_SHADOW_NAMES = frozenset({"pytest.py", "py.py", "_pytest", "pytest", "pluggy", "pluggy.py"})

#: Pristine bytes and mode of a path at the base commit, or None if it did not exist.
PristineSource = Callable[[str], "tuple[bytes, int] | None"]

IO_DIR = "/harness"


def install_trusted_files(sandbox: Sandbox) -> None:
    """Every file of harness/incontainer/ (the result reporter, ...) into the sandbox under
    :data:`harness.incontainer.TRUSTED_DIR`, root-owned and read-only, in one archive call
    (at run time: a changed reporter never rebuilds an image)."""
    rel = posixpath.relpath(incontainer.TRUSTED_DIR, IO_DIR)
    if rel.startswith(".."):  # the archive goes into the I/O tmpfs; a parent entry would reset its mode
        raise ValueError(f"{incontainer.TRUSTED_DIR} must be under {IO_DIR}")
    sandbox.put_files(IO_DIR, {f"{rel}/{name}": data for name, data in incontainer.files().items()},
                      mode=incontainer.FILE_MODE, owner=0)
#: Run as root in a container whose root holds set-up capabilities: become the harness
#: user with no capability left anywhere (bounding, inheritable, ambient).
DROP_ALL_PRIVILEGES = ["/usr/bin/setpriv", "--reuid=1000", "--regid=1000", "--clear-groups",
                       "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--"]
BASE_ENV = {
    "PATH": f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PIP_NO_INDEX": "1",
    "PIP_FIND_LINKS": "/opt/harness/wheels",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


@dataclass(frozen=True)
class EvalConfig:
    """Grading configuration. Times in seconds, sizes in bytes."""

    timeout: int | None = None          # test-run timeout; None: the spec's
    setup_timeout: int = 300            # every other command
    test_output_limit: int = 32 * 1024 * 1024
    junit_limit: int = 64 * 1024 * 1024
    restore_test_infra: bool = True
    canaries: bool = True
    forbid_runner_internals: bool = True

    def as_dict(self) -> dict:
        return {"timeout": self.timeout, "setup_timeout": self.setup_timeout,
                "test_output_limit": self.test_output_limit, "junit_limit": self.junit_limit,
                "restore_test_infra": self.restore_test_infra, "canaries": self.canaries,
                "forbid_runner_internals": self.forbid_runner_internals}


@dataclass
class RunOutputs:
    """Raw artefacts kept next to report.json."""

    test_output: str = ""
    junit_xml: bytes | None = None
    patch: str = ""


@dataclass
class Evaluation:
    result: InstanceResult
    outputs: RunOutputs = field(default_factory=RunOutputs)


def scrubbed_env(spec: EnvSpec) -> dict[str, str]:
    env = dict(BASE_ENV)
    env.update(spec.env_dict)
    return env


def env_argv(env: dict[str, str], argv: list[str]) -> list[str]:
    """Run argv with exactly ``env`` (``env -i``: nothing inherited from the image)."""
    return ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in sorted(env.items())), *argv]


def test_files_of(test_patch: PatchFiles, runner: str = "pytest") -> list[str]:
    """The test files of the test patch, as the spec's runner sees them (Python files it
    modifies or creates)."""
    return get_runner(runner).test_files(test_patch)


def build_test_command(spec: EnvSpec, test_patch: PatchFiles, junit_path: str) -> str:
    """The spec's test command as its runner spells it (harness.runners): the command,
    its targets, and only then the runner's own options."""
    runner = get_runner(spec.runner)
    targets = runner.targets(test_patch) if spec.test_directives == "test_files" else []
    return runner.command(spec.test_cmd, targets, junit_path, get_parser(spec.parser).runner_args)


class Evaluator:
    """Runs the sequence above. One instance per (instance, prediction); no shared state."""

    def __init__(self, instance: Instance, prediction: Prediction, spec: EnvSpec,
                 pristine: PristineSource, config: EvalConfig,
                 protected_modules: frozenset[str] = frozenset()) -> None:
        self.protected_modules = protected_modules
        self.instance = instance
        self.prediction = prediction
        self.spec = spec
        self.pristine = pristine
        self.config = config
        self.runner: Runner = get_runner(spec.runner)
        self.env = scrubbed_env(spec)
        self.result = InstanceResult(
            instance_id=instance.instance_id, repo=instance.repo,
            model_name_or_path=prediction.model_name_or_path, status=InstanceStatus.INVALID,
            attempt=prediction.attempt, parser=spec.parser, runner=spec.runner, id_convention=spec.id_convention,
            patch_is_None=prediction.model_patch is None, patch_exists=not prediction.is_empty,
            checksums={"instance": instance.checksum(), "patch": prediction.checksum(),
                       "spec": spec.checksum()},
            cost=_number(prediction.extra.get("cost")), calls=_int(prediction.extra.get("calls")),
        )
        self.outputs = RunOutputs(patch=prediction.model_patch or "")
        self.canary: Canary | None = None

    # ----------------------------------------------------------------- helpers
    def _phase(self, name: str, started: float) -> None:
        self.result.timings[name] = round(self.result.timings.get(name, 0.0) + time.monotonic() - started, 4)

    def _run(self, sandbox: Sandbox, phase: str, argv: list[str], timeout: float | None = None,
             output_limit: int = 1 << 20) -> ExecResult:
        res = sandbox.exec(env_argv(self.env, argv), timeout=timeout or self.config.setup_timeout,
                           output_limit=output_limit)
        self.result.commands.append(CommandRecord(
            phase=phase, argv=argv, exit_code=res.exit_code, duration=round(res.duration, 4),
            timed_out=res.timed_out, truncated=res.truncated, output_tail=res.output[-4000:]))
        if res.killed and not res.timed_out and not res.truncated:
            raise ContainerDied("container killed during " + phase)
        return res

    def _reset_tree(self, sandbox: Sandbox) -> None:
        res = self._run(sandbox, "reset", ["/bin/sh", "-c",
                                           f"find /testbed -mindepth 1 -delete && cp -a {PRISTINE_TREE}/. /testbed/"])
        if not res.ok:
            raise ContainerDied(f"could not restore the pristine tree: {res.output[-500:]}")

    # ----------------------------------------------------------------- sequence
    def run(self, start_sandbox: Callable[[], Sandbox]) -> Evaluation:
        """Evaluate. Grading outcomes become the verdict; InfrastructureError propagates
        (the caller may retry) after the sandbox is closed."""
        t0 = time.monotonic()
        try:
            test_patch = patch_files(self.instance.test_patch)
            model_files = check_model_patch(self.prediction.model_patch or "")
        except PatchRejected as exc:
            evaluation = self._invalid(ErrorReason.PATCH_REJECTED, str(exc))
            settle_origin(self.result, self.is_reference)
            return evaluation
        self._phase("validate", t0)

        t = time.monotonic()
        sandbox = start_sandbox()
        self._phase("start", t)
        try:
            self._sequence(sandbox, test_patch, model_files)
        except GradingOutcome as outcome:
            self._finish_invalid(ErrorReason(outcome.reason), str(outcome))
        finally:
            t = time.monotonic()
            sandbox.close()
            self._phase("cleanup", t)
            self.result.timings["total"] = round(time.monotonic() - t0, 4)
        settle_origin(self.result, self.is_reference)
        return Evaluation(self.result, self.outputs)

    @property
    def is_reference(self) -> bool:
        """The prediction is the instance's own reference patch (read from the bytes, not
        from the model's name)."""
        return self.prediction.model_patch == self.instance.patch

    def _sequence(self, sandbox: Sandbox, test_patch: PatchFiles, model_files: PatchFiles) -> None:
        io_token = secrets.token_hex(8)
        in_dir = f"{IO_DIR}/in-{io_token}"
        out_dir = f"{IO_DIR}/out-{secrets.token_hex(8)}"
        t = time.monotonic()
        files = {"test.diff": self.instance.test_patch.encode()}
        if not self.prediction.is_empty:
            files["model.diff"] = (self.prediction.model_patch or "").encode("utf-8", "surrogateescape")
        sandbox.put_files(IO_DIR, {f"in-{io_token}/{k}": v for k, v in files.items()}, mode=0o444)
        install_trusted_files(sandbox)
        self._reset_tree(sandbox)
        mk = self._run(sandbox, "prepare", ["/bin/mkdir", "-p", out_dir])
        if not mk.ok:
            raise ContainerDied("could not create the output directory")
        self._phase("prepare", t)

        # The history check: the code under test must see exactly one commit.
        t = time.monotonic()
        history = self._run(sandbox, "history_check", ["git", "rev-list", "--all", "--count"])
        self._phase("history_check", t)
        commits = history.output.strip()
        self.result.integrity_details["history_commits"] = int(commits) if commits.isdigit() else commits
        if commits != "1":
            self.result.integrity_flags.append("history_not_stripped")

        # 3. model patch
        t = time.monotonic()
        if self.prediction.is_empty:
            self.result.patch_successfully_applied = False
        else:
            self._apply_model_patch(sandbox, f"{in_dir}/model.diff")
        self._phase("apply_patch", t)

        # 4. restore test files and test infrastructure from the pristine copy
        t = time.monotonic()
        touched_tests = sorted(set(model_files.all) & set(test_patch.all))
        infra = sorted(p for p in model_files.all if self._is_test_infra(p))
        test_dirs = {f.rsplit("/", 1)[0] if "/" in f else "" for f in test_patch.all}
        shadows = sorted(p for p in model_files.created
                         if p not in infra and self._shadows_module(p, test_dirs))
        if shadows:
            self.result.integrity_flags.append("patch_shadows_module")
            self.result.integrity_details["patch_shadows_module"] = shadows
            infra = sorted({*infra, *shadows})
        self._scan_runner_internals(test_patch)
        if touched_tests:
            self.result.integrity_flags.append("patch_touched_tests")
            self.result.integrity_details["patch_touched_tests"] = touched_tests
        if infra:
            self.result.integrity_flags.append("patch_touched_test_infra")
            self.result.integrity_details["patch_touched_test_infra"] = infra
        restore = list(test_patch.all)
        if self.config.restore_test_infra:
            restore += [p for p in infra if p not in restore]
        self._restore(sandbox, restore)
        self._phase("restore_tests", t)

        # 5. test patch
        t = time.monotonic()
        check = self._run(sandbox, "test_patch_check",
                          ["git", "apply", "--check", "--verbose", f"{in_dir}/test.diff"])
        if not check.ok:
            raise TestPatchApplyFailed(f"test patch does not apply: {check.output[-1500:]}")
        applied = self._run(sandbox, "test_patch", ["git", "apply", "--verbose", f"{in_dir}/test.diff"])
        if not applied.ok:
            raise TestPatchApplyFailed(f"test patch failed to apply: {applied.output[-1500:]}")
        self._phase("apply_test_patch", t)

        # 6. re-install (runs the patched setup.py: untrusted, unprivileged; checked)
        if self.spec.reinstall_needed(model_files.all):
            t = time.monotonic()
            self._reinstall(sandbox)
            self._phase("reinstall", t)

        # 6b. local stand-in services (before any of the model's code runs)
        if self.spec.services:
            t = time.monotonic()
            self._start_services(sandbox)
            self._phase("services", t)

        # 7. run the tests (with the canaries beside the first test file)
        t = time.monotonic()
        timeout = self.config.timeout or self.spec.timeout
        junit_path = f"{out_dir}/results-{secrets.token_hex(6)}.xml"
        test_files = self.runner.test_files(test_patch)
        self.canary = Canary.make(test_files, self.runner) if self.config.canaries else None
        if self.canary is not None:
            # Appended to a real test file, after the test patch and before anything of the
            # model's runs: the canaries look like any other new test there.
            current = sandbox.get_file(f"/testbed/{self.canary.path}", 16 * 1024 * 1024)
            if current is None:
                self.canary = None
            else:
                sandbox.put_files("/testbed", {self.canary.path: current + self.canary.source()})
        command = build_test_command(self.spec, test_patch, junit_path)
        argv = ["/usr/bin/timeout", "--kill-after=10", str(timeout), "/bin/bash", "-c", command]
        full_argv, user = env_argv(self.env, argv), None
        if getattr(sandbox, "privileged_setup", False):
            # root here holds set-up capabilities: the tests start as the harness user with
            # an empty bounding set, so neither they nor anything they exec can hold one.
            full_argv = [*DROP_ALL_PRIVILEGES, *full_argv]
            user = ROOT
        res = sandbox.exec(full_argv, timeout=timeout + 30, output_limit=self.config.test_output_limit, user=user)
        self.result.commands.append(CommandRecord(
            phase="tests", argv=argv, exit_code=res.exit_code, duration=round(res.duration, 4),
            timed_out=res.timed_out, truncated=res.truncated, output_tail=res.output[-4000:]))
        self.outputs.test_output = res.output
        self.result.test_exit_code = res.exit_code
        self._phase("tests", t)

        # 8. copy out
        t = time.monotonic()
        junit = None
        if not res.killed:
            junit = sandbox.get_file(junit_path, self.config.junit_limit)
        self.outputs.junit_xml = junit
        self._phase("copy_out", t)

        # 9. parse and grade on the host
        t = time.monotonic()
        if res.truncated:
            return self._finish_invalid(ErrorReason.OUTPUT_LIMIT_EXCEEDED,
                                        f"test output exceeded {self.config.test_output_limit} bytes")
        if res.timed_out or res.exit_code in (124, 137) and _timeout_hit(res, timeout):
            return self._finish_invalid(ErrorReason.TIMEOUT, f"tests exceeded {timeout} s")
        if res.killed:
            raise ContainerDied("container killed during the test run")
        self._grade(res, test_files)
        self._phase("grade", t)

    def _reinstall(self, sandbox: Sandbox) -> None:
        """The spec's re-install under its own timeout; incremental because the image
        keeps the build artefacts. A failure is never graded on the old binaries."""
        if self.spec.compiler == "build":
            raise RebuildFailed("the patch touches compiled sources but the test image has no compiler "
                                "(spec compiler: build; use compiler: keep)", reason="environment_build_failed",
                                origin="harness")
        timeout = self.spec.reinstall_timeout
        res = self._run(sandbox, "reinstall", ["/bin/bash", "-c", self.spec.reinstall_command], timeout=timeout,
                        output_limit=4 << 20)
        if res.ok:
            return
        what = f"exceeded {timeout} s" if res.timed_out else f"failed (exit {res.exit_code})"
        detail = f"re-install `{self.spec.reinstall_command}` {what}: {res.output[-1500:]}"
        if self.prediction.is_empty:  # nothing of the model's ran: the environment cannot rebuild
            raise RebuildFailed(detail, reason="environment_build_failed", origin="harness")
        raise RebuildFailed(detail, reason="timeout" if res.timed_out else "rebuild_failed")

    def _shadows_module(self, path: str, test_dirs: set[str]) -> bool:
        """A new module or package, in a directory that ends up on sys.path (the root or
        a test directory), named like a module the runner or the standard library loads."""
        directory, _, name = path.rpartition("/")
        parts = path.split("/")
        candidates = []
        if name.endswith(".py") and (directory == "" or directory in test_dirs):
            candidates.append(name[:-3])
        for depth in range(len(parts) - 1):  # a new package: dir/<name>/...
            parent = "/".join(parts[:depth])
            if parent == "" or parent in test_dirs:
                candidates.append(parts[depth])
        return any(c in self.protected_modules for c in candidates)

    def _scan_runner_internals(self, test_patch: PatchFiles) -> None:
        """Flag added lines that reach into the test runner (outside the restored test files)."""
        restored = set(test_patch.all)
        hits: list[str] = []
        current = None
        for line in (self.prediction.model_patch or "").splitlines():
            if line.startswith("+++ "):
                target = line[4:].split("\t")[0].strip()
                current = target[2:] if target.startswith("b/") else target
            elif line.startswith("+") and current and current not in restored and not self._is_test_infra(current):
                match = RUNNER_INTERNALS.search(line) or (
                    re.search(self.runner.internals, line) if self.runner.internals else None)
                if match:
                    hits.append(f"{current}: {match.group(0)}")
        if hits:
            self.result.integrity_flags.append("patch_references_test_runner")
            self.result.integrity_details["patch_references_test_runner"] = hits[:20]

    def _start_services(self, sandbox: Sandbox) -> None:
        """Set up and start each spec service, then wait until its addresses accept."""
        for svc in self.spec.services:
            for step in svc.setup:
                res = sandbox.exec(env_argv(BASE_ENV, ["/bin/bash", "-c", step]), user=ROOT,
                                   timeout=self.config.setup_timeout, workdir="/")
                self.result.commands.append(CommandRecord("service_setup", ["/bin/bash", "-c", step], res.exit_code,
                                                          round(res.duration, 4), res.timed_out, res.truncated,
                                                          res.output[-4000:]))
                if not res.ok:
                    raise ServiceUnavailable(f"service {svc.name}: set-up {step!r} failed: {res.output[-800:]}")
            env = {**BASE_ENV, "PATH": f"{svc.venv}/bin:{BASE_ENV['PATH']}", **dict(svc.env)}
            log = f"/tmp/service-{svc.name}.log"
            sandbox.start_background(env_argv(env, ["/bin/bash", "-c", f"( {svc.command} ) >{log} 2>&1"]),
                                     user=SERVICE_USER, workdir="/tmp")
            self.result.commands.append(CommandRecord("service_start", ["/bin/bash", "-c", svc.command], None, 0.0))
            if svc.ready:
                probe = ("import socket,sys,time\n"
                         f"deadline=time.time()+{svc.ready_timeout}\n"
                         f"for host,port in {[tuple(a.split(':')) for a in svc.ready]!r}:\n"
                         "    while True:\n"
                         "        try:\n"
                         "            socket.create_connection((host,int(port)),timeout=1).close(); break\n"
                         "        except OSError:\n"
                         "            if time.time()>deadline: sys.exit(f'{host}:{port} not accepting')\n"
                         "            time.sleep(0.1)\n")
                res = self._run(sandbox, "service_ready", ["/usr/bin/python3", "-c", probe],
                                timeout=svc.ready_timeout + 30)
                if not res.ok:
                    tail = sandbox.exec(["/bin/sh", "-c", f"tail -c 3000 {log}"], timeout=30).output
                    raise ServiceUnavailable(f"service {svc.name} did not come up: {res.output[-300:]}\n{tail}")

    def _is_test_infra(self, path: str) -> bool:
        return (matches_any(path, TEST_INFRA_PATTERNS) or path.split("/", 1)[0] in ROOT_SHADOW_NAMES
                or path in self.runner.infra_patterns)

    def _apply_model_patch(self, sandbox: Sandbox, patch_path: str) -> None:
        strategies = [
            ("git_apply", ["git", "apply", "--verbose", "--whitespace=nowarn", patch_path]),
            ("git_apply_3way", ["git", "apply", "--verbose", "--3way", "--whitespace=nowarn", patch_path]),
            ("patch_fuzz", ["patch", "--batch", "--forward", "--fuzz=5", "-p1", "--no-backup-if-mismatch",
                            "-i", patch_path]),
        ]
        outputs = []
        for index, (name, argv) in enumerate(strategies):
            if index:
                self._reset_tree(sandbox)
            res = self._run(sandbox, f"apply:{name}", argv)
            if res.ok:
                self.result.patch_successfully_applied = True
                self.result.apply_strategy = name
                return
            outputs.append(f"{name}: {res.output[-600:]}")
        self._reset_tree(sandbox)
        raise PatchApplyFailed("no strategy applied the model patch:\n" + "\n".join(outputs))

    def _restore(self, sandbox: Sandbox, paths: list[str]) -> None:
        if not paths:
            return
        rm = self._run(sandbox, "restore", ["/bin/rm", "-rf", "--", *paths])
        if not rm.ok:
            raise ContainerDied(f"restoring test files failed: {rm.output[-500:]}")
        by_mode: dict[int, dict[str, bytes]] = {}
        for path in paths:
            found = self.pristine(path)
            if found is not None:
                data, mode = found
                by_mode.setdefault(0o755 if mode & 0o111 else 0o644, {})[path] = data
        for mode, files in by_mode.items():
            sandbox.put_files("/testbed", files, mode=mode)

    def _grade(self, res: ExecResult, test_files: list[str]) -> None:
        judged = judge_run(self.instance, self.spec.parser, res.output, self.outputs.junit_xml, res.exit_code,
                           test_files, self.canary, convention=self.spec.id_convention)
        apply_judgement(self.result, judged)
        if ("patch_references_test_runner" in self.result.integrity_flags and self.config.forbid_runner_internals
                and self.result.error_reason is None):
            hits = self.result.integrity_details.get("patch_references_test_runner", [])
            self._finish_invalid(ErrorReason.TAMPERED,
                                 f"the patch reaches into the test runner: {', '.join(hits[:5])}")

    def _invalid(self, reason: ErrorReason, detail: str) -> Evaluation:
        self._finish_invalid(reason, detail)
        return Evaluation(self.result, self.outputs)

    def _finish_invalid(self, reason: ErrorReason, detail: str) -> None:
        verdict = grade(self.instance.tests, {}, reason)
        r = self.result
        r.status, r.resolved = InstanceStatus.INVALID, False
        r.f2p_failure, r.p2p_failure = list(verdict.f2p_failure), list(verdict.p2p_failure)
        r.f2p_success, r.p2p_success = [], []
        r.error_reason, r.error_detail = reason, detail[-4000:]


@dataclass
class Judgement:
    """Everything grading concluded from one run's artefacts (pure data)."""

    verdict: "Grade"
    reason: ErrorReason | None
    detail: str
    flags: list[str]
    details: dict
    parse_source: str
    parse_notes: list[str]
    collected: list[str]


def judge_run(instance: Instance, parser_name: str, output: str, junit_xml: bytes | None,
              exit_code: int | None, test_files: list[str], canary: "Canary | None",
              convention: str = "pytest") -> Judgement:
    """Parse a finished test run's artefacts and grade them. Pure: used by the live
    evaluation and by ``harness report`` to re-grade saved outputs.

    The parser reports native ids; the canaries are judged on those; then the spec's id
    convention keys the results by the dataset's ids (harness/grading/conventions.py).
    """
    parser = get_parser(parser_name)
    ids = get_convention(convention)
    tests, ignored = gradable_tests(instance, convention)
    graded = (*tests.fail_to_pass, *tests.pass_to_pass)
    parsed = parser(RunArtefacts(output=output, junit_xml=junit_xml, known_files=tuple(test_files),
                                 graded_ids=graded))
    statuses = dict(parsed.statuses)
    flags: list[str] = []
    details: dict = {}
    reason, detail = _check_canaries(canary, statuses, exit_code, flags, details)
    mapped = map_results(ids, statuses, parsed.labels, graded, parsed.conflicts)
    graded_set = set(graded)
    graded_conflicts = [c for c in mapped.conflicts if c in graded_set]
    if graded_conflicts:
        flags.append("ambiguous_results")
        details["ambiguous_results"] = graded_conflicts[:50]
        if reason is None:
            reason = ErrorReason.AMBIGUOUS_RESULTS
            detail = f"contradictory results for graded tests: {graded_conflicts[:10]}"
    collection_errors = parsed.collection_errors or junit_collection_errors(junit_xml)
    not_collected = [t for t in graded if t not in mapped.statuses]
    if collection_errors:
        flags.append("collection_error")
        details["collection_errors"] = collection_errors[:50]
    if reason is None and not statuses:
        reason = ErrorReason.SUITE_DID_NOT_RUN
        detail = f"no test results (runner exit code {exit_code}; {'; '.join(parsed.notes[:3])})"
    elif reason is None and collection_errors and not_collected:
        # graded tests never ran because a test module did not import: not silently "failed"
        reason = ErrorReason.COLLECTION_ERROR
        detail = (f"{len(not_collected)} graded tests were never collected; collection failed in "
                  f"{', '.join(collection_errors[:5])}")
        details["not_collected"] = not_collected[:100]
    if ignored:
        flags.append("dataset_ids_ignored")
        details["ignored_test_ids"] = ignored
    if mapped.sources:
        details["id_sources"] = dict(list(mapped.sources.items())[:100])
    collected = sorted({*statuses, *(t for t in graded if t in mapped.statuses)})
    return Judgement(grade(tests, mapped.statuses, reason), reason, detail, flags, details,
                     parsed.source, (parsed.notes + mapped.notes)[:50], collected)


def gradable_tests(instance: Instance, convention: str = "pytest") -> tuple[TestLists, list[str]]:
    """The instance's test lists without the entries its id convention knows to be
    fragments of log lines, and those fragments.

    Some published lists hold fragments of log lines (``[100%]``, ``[``) that the
    dataset's own log parser mistook for test ids (pytest-dev__pytest-5227); no runner
    reports them, so they are left out of grading and listed in the report
    (``integrity.ignored_test_ids``) and by ``harness validate``. Any other id the
    convention cannot address is refused before anything runs
    (harness/runners/checks.py), never dropped here.
    """
    kinds = get_convention(convention).classify
    ignored = [t for t in (*instance.fail_to_pass, *instance.pass_to_pass) if kinds(t) is IdKind.LOG_FRAGMENT]
    if not ignored:
        return instance.tests, []
    keep = set(ignored)
    return (TestLists(tuple(t for t in instance.fail_to_pass if t not in keep),
                      tuple(t for t in instance.pass_to_pass if t not in keep)), ignored)


def settle_origin(result: InstanceResult, reference_patch: bool) -> None:
    """Charge an INVALID result by the evidence (harness/grading/origins.py)."""
    origin = evidence_origin(result.error_reason, reference_patch=reference_patch)
    result.origin = origin if result.error_reason and origin != result.error_reason.origin else None


def apply_judgement(result: InstanceResult, judged: Judgement) -> None:
    verdict = judged.verdict
    result.status, result.resolved = verdict.status, verdict.resolved
    result.f2p_success, result.f2p_failure = list(verdict.f2p_success), list(verdict.f2p_failure)
    result.p2p_success, result.p2p_failure = list(verdict.p2p_success), list(verdict.p2p_failure)
    result.missing, result.f2p_rate, result.p2p_rate = list(verdict.missing), verdict.f2p_rate, verdict.p2p_rate
    result.error_reason, result.error_detail = judged.reason, judged.detail
    for flag in judged.flags:
        if flag not in result.integrity_flags:
            result.integrity_flags.append(flag)
    result.integrity_details.update(judged.details)
    result.parse_source, result.parse_notes, result.collected = \
        judged.parse_source, judged.parse_notes, judged.collected


def _check_canaries(canary: "Canary | None", statuses: dict, exit_code: int | None, flags: list[str],
                    details: dict) -> tuple[ErrorReason | None, str]:
    """Remove the canaries from ``statuses`` and judge the run by them.

    The must-fail canary makes an honest run exit non-zero and report one failure.
    Reported passed (or skipped, xfailed), or an exit code of 0, means something
    rewrote the outcomes: the run is ``tampered``.
    """
    if canary is None:
        return None, ""
    fail_status = statuses.pop(canary.fail_id, None)
    pass_status = statuses.pop(canary.pass_id, None)
    details["canaries"] = {"must_fail": fail_status.value if fail_status else None,
                           "must_pass": pass_status.value if pass_status else None,
                           "path": canary.path, "pass_name": canary.pass_name, "fail_name": canary.fail_name,
                           "class_name": canary.class_name}
    if pass_status is not None and pass_status is not TestStatus.PASSED:
        flags.append("canary_pass_failed")
    if fail_status is None:
        if statuses:
            flags.append("canary_missing")
    elif fail_status is TestStatus.SKIPPED and pass_status is TestStatus.SKIPPED:
        flags.append("canary_skipped")  # the whole module is skipped: no evidence either way
    elif fail_status not in (TestStatus.FAILED, TestStatus.ERROR):
        flags.append("canary_tampered")
        return ErrorReason.TAMPERED, f"the must-fail canary was reported {fail_status.value}"
    if exit_code == 0:
        flags.append("exit_code_mismatch")
        return ErrorReason.TAMPERED, "the test runner exited 0 although the must-fail canary ran"
    return None, ""


_CANARY_WORDS = ("roundtrip", "regression", "edge_case", "boundary", "behaviour", "compat", "defaults",
                 "ordering", "handles_input", "consistency")


@dataclass(frozen=True)
class Canary:
    """Two tests the harness appends to a test file of every run: one must pass, one
    must fail. Their names are random and ordinary, so code under test cannot tell them
    from the instance's own new tests. For runners that run TestCase methods
    (``class_name`` set) they are two methods of a new ``unittest.TestCase`` subclass."""

    path: str
    pass_name: str
    fail_name: str
    class_name: str | None = None

    @classmethod
    def make(cls, test_files: list[str], runner: "Runner | None" = None) -> "Canary | None":
        runner = runner or get_runner("pytest")
        path = runner.canary_file(test_files)
        if path is None:
            return None
        words = list(_CANARY_WORDS)
        first = words.pop(secrets.randbelow(len(words)))
        second = words[secrets.randbelow(len(words))]
        class_name = None
        if runner.canary_style == "method":
            class_name = "Test" + "".join(w.capitalize() for w in words[secrets.randbelow(len(words))].split("_")) \
                + secrets.token_hex(3).capitalize()
        return cls(path, f"test_{first}_{secrets.token_hex(4)}", f"test_{second}_{secrets.token_hex(4)}", class_name)

    @property
    def fail_id(self) -> str:
        return "::".join(p for p in (self.path, self.class_name, self.fail_name) if p)

    @property
    def pass_id(self) -> str:
        return "::".join(p for p in (self.path, self.class_name, self.pass_name) if p)

    def source(self) -> bytes:
        value = secrets.randbelow(1000) + 1
        if self.class_name:
            alias = f"_unittest_{secrets.token_hex(3)}"
            return (f"\n\n\nimport unittest as {alias}\n\n\nclass {self.class_name}({alias}.TestCase):\n"
                    f"    def {self.pass_name}(self):\n        self.assertEqual({value}, {value})\n\n"
                    f"    def {self.fail_name}(self):\n        self.assertEqual({value}, {value + 1})\n").encode()
        return (f"\n\n\ndef {self.pass_name}():\n    assert {value} == {value}\n\n\n"
                f"def {self.fail_name}():\n    assert {value} == {value + 1}\n").encode()


def _timeout_hit(res: ExecResult, timeout: int) -> bool:
    """coreutils ``timeout`` exits 124 (or 137 after --kill-after) when the limit hit."""
    return res.duration >= timeout - 1


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def exception_record(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)[:4000],
            "traceback": "".join(traceback.format_exception(exc))[-8000:]}
