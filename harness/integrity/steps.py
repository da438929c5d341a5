"""The steps the harness runs in a sandbox, and what goes in and comes out of it.

Layout of ``/harness`` (a root-owned tmpfs) during one evaluation::

    TRUSTED_DIR                  root, 0755 (harness.incontainer.TRUSTED_DIR, under /harness): prepare.py,
                                 launcher.py, evidence_channel.py, py/ (bootstrap, monitor, plugin,
                                 reporter), files 0444
    ACTIVATION                   root, 0644, while the test command runs (harness.incontainer.ACTIVATION)
    /harness/evidence.sock       root, group of the test user, 0620, while the test command runs
    /harness/in-<token>/         test user, 0700: request.json, model.diff (removed once applied),
                                 remaining.diff (the already-present fallback's, removed once applied)
    /harness/plan-<token>/       root, 0700: files/ (the test files to install)
    /harness/run-<token>/        test user, 0700, made just before the tests: the runner's results file
    /harness/out-<token>/        root, 0700: evidence.json, events.jsonl, results (copied by root);
                                 build.json, build-events.jsonl, tree.json (the build step)
    /harness/report-<token>/     root, 0755 (the build step): request.json (0444) of the tree report
    /harness/svc-<token>/        root, 0755: one directory per service, its user's, 0700 (cwd, HOME, log)

The container's first process fills ``/testbed`` from the pristine tree as the test user
(:func:`early_reset`). Then **one exec** runs to the end (:func:`session_argv`,
harness/engine/exec_session.py): its first message on stdin puts ``trusted/``, ``in-``,
``plan-`` (with the test files, which do not depend on what the patch did) and ``out-`` in
place (:data:`SESSION_BOOT`); the launcher, as root, runs the set-up step as the test user and
sends its report to the host (on its stderr); the host sends the plan (decided from the tree
truth) on the launcher's stdin; the launcher installs the test files, seals and runs the
tests, and sends ``out-`` back as its last message (:func:`received_files`; the archive API
reads it when that message did not come).
When the spec rebuilds in place (harness/integrity/rebuild.py), a *build step* runs between
the two, in the same exec: its own plan, the rebuild as the test user before anything is
sealed, and the tree truth again (``prepare.py`` in report mode, from a root-owned request:
the test user could have rewritten ``in-``), read back with ``out-``; then the test plan.
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import secrets
from dataclasses import dataclass

from harness import incontainer
from harness.engine.layers import PRISTINE_TREE
from harness.engine import archive
from harness.engine.sandbox import EarlyCommand, FileEntry
from harness.integrity.evidence import SURVEY_WATCH

IO_DIR = "/harness"
TRUSTED = incontainer.TRUSTED_DIR
EVIDENCE_SOCKET = f"{IO_DIR}/evidence.sock"
SYSTEM_PYTHON = "/usr/bin/python3"
TESTBED = "/testbed"
TEST_UID = 1000
SERVICE_UID = 1001
#: What the test step leaves in its output directory (the sandbox's names; the run
#: directory's, spelled alike, are harness.paths's).
RESULTS_NAME = "results.xml"
EVIDENCE_NAME = "evidence.json"
EVENTS_NAME = "events.jsonl"
#: written (root, 0644) by the container's first process once it has filled the working copy
TESTBED_READY = f"{IO_DIR}/testbed-ready"
#: what the test user's commands of the trusted steps drop (processes.DROP in the sandbox)
DROP_TO_TEST_USER = ("setpriv", f"--reuid={TEST_UID}", f"--regid={TEST_UID}", "--clear-groups",
                     "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--")


def early_reset() -> EarlyCommand:
    """The working copy filled from the pristine tree by the container's first process, as
    the test user with nothing: the set-up step's reset (``prepare.py``), started while the
    host is still putting the inputs in. Nothing of the model is in the sandbox yet; the
    set-up step waits for :data:`TESTBED_READY` and copies the tree itself if it failed."""
    return EarlyCommand((*DROP_TO_TEST_USER, "find", PRISTINE_TREE, "-mindepth", "1", "-maxdepth", "1",
                         "-exec", "cp", "-a", "-t", TESTBED, "--", "{}", "+"), TESTBED_READY)


@dataclass(frozen=True)
class Layout:
    token: str
    run_token: str

    @classmethod
    def new(cls) -> "Layout":
        return cls(secrets.token_hex(8), secrets.token_hex(8))

    @property
    def in_dir(self) -> str:
        return f"{IO_DIR}/in-{self.token}"

    @property
    def plan_dir(self) -> str:
        return f"{IO_DIR}/plan-{self.token}"

    @property
    def out_dir(self) -> str:
        return f"{IO_DIR}/out-{self.token}"

    @property
    def run_dir(self) -> str:
        return f"{IO_DIR}/run-{self.run_token}"

    @property
    def report_dir(self) -> str:
        return f"{IO_DIR}/report-{self.token}"

    @property
    def service_dir(self) -> str:
        return f"{IO_DIR}/svc-{self.token}"

    @property
    def staged(self) -> str:
        return f"{self.plan_dir}/files"

    @property
    def model_patch(self) -> str:
        return f"{self.in_dir}/model.diff"

    @property
    def remaining_patch(self) -> str:
        """What the already-present fallback applies: the model patch less the hunks the
        tree already holds (written by the set-up step, removed once applied)."""
        return f"{self.in_dir}/remaining.diff"


def apply_strategies(patch_path: str) -> list[dict]:
    """``git apply``, then ``--3way`` (index and objects redirected outside ``.git``), then
    ``patch --fuzz``; the set-up step resets the tree between them."""
    return [
        {"name": "git_apply", "argv": ["git", "apply", "--verbose", "--whitespace=nowarn", patch_path]},
        {"name": "git_apply_3way", "isolate_git": True,
         "argv": ["git", "apply", "--verbose", "--3way", "--whitespace=nowarn", patch_path]},
        {"name": "patch_fuzz", "argv": ["patch", "--batch", "--forward", "--fuzz=5", "-p1", "--no-backup-if-mismatch",
                                        "-i", patch_path]},
    ]


def trusted_entries() -> dict[str, FileEntry]:
    """Every file of harness/incontainer/ for :data:`harness.incontainer.TRUSTED_DIR`,
    root-owned and read-only (relative to /harness: the first archive call of a run)."""
    trusted = _under_io(incontainer.TRUSTED_DIR)
    return {trusted: FileEntry(None, incontainer.DIR_MODE, 0),
            f"{trusted}/py": FileEntry(None, incontainer.DIR_MODE, 0),
            **{f"{trusted}/{rel}": FileEntry(data, incontainer.FILE_MODE, 0)
               for rel, data in incontainer.files().items()}}


def initial_files(layout: Layout, model_patch: bytes | None, env: dict[str, str], timeout: int,
                  limits: dict[str, int], staged: dict[str, tuple[bytes, int]],
                  sections: list[dict] | None = None, early_reset: str | None = None) -> dict[str, FileEntry]:
    """Everything both steps need that does not depend on the tree truth, for one archive
    call into /harness; ``staged`` are the test files (path -> (bytes, mode)); ``sections``
    the patch's hunks as byte spans (:meth:`harness.patches.HunkSpans.as_json`) for the
    set-up step's already-present fallback (None: no fallback); ``early_reset`` the marker of
    the sandbox's :func:`early_reset` (None: the set-up step copies the tree)."""
    request: dict[str, object] = {"testbed": TESTBED, "pristine": PRISTINE_TREE, "env": env, "timeout": timeout,
                                  "patch": layout.model_patch if model_patch is not None else None,
                                  "strategies": apply_strategies(layout.model_patch), **limits}
    if early_reset:
        request["early_reset"] = early_reset
    if model_patch is not None and sections:
        request["fallback"] = {"sections": sections, "remaining": layout.remaining_patch,
                               "strategies": apply_strategies(layout.remaining_patch)}
    name = layout.in_dir.rsplit("/", 1)[1]
    files = {**trusted_entries(),
             name: FileEntry(None, 0o700, TEST_UID),
             f"{name}/request.json": FileEntry(json.dumps(request).encode(), 0o400, TEST_UID),
             layout.plan_dir.rsplit("/", 1)[1]: FileEntry(None, 0o700, 0),
             layout.out_dir.rsplit("/", 1)[1]: FileEntry(None, 0o700, 0)}
    if model_patch is not None:
        files[f"{name}/model.diff"] = FileEntry(model_patch, 0o400, TEST_UID)
    plan_name = layout.plan_dir.rsplit("/", 1)[1]
    for rel, (data, mode) in staged.items():
        files[f"{plan_name}/files/{rel}"] = FileEntry(data, mode, 0)
    if staged:
        files[f"{plan_name}/files"] = FileEntry(None, 0o700, 0)
    return files


def _under_io(path: str) -> str:
    """``path`` relative to /harness (the trusted files go in with the same archive call)."""
    rel = posixpath.relpath(path, IO_DIR)
    if rel.startswith(".."):
        raise ValueError(f"{path} must be under {IO_DIR}")
    return rel


def prepare_argv(layout: Layout) -> list[str]:
    return [SYSTEM_PYTHON, "-I", "-S", f"{TRUSTED}/prepare.py", f"{layout.in_dir}/request.json"]


#: What the session's exec runs before the launcher (root, the system Python, its source in
#: argv: nothing of the sandbox's is trusted before it): the first message on stdin is a tar
#: of the evaluation's inputs (:func:`initial_files`), extracted under /harness with the
#: owners and modes it names; then the launcher, from the trusted files just put in place.
SESSION_BOOT = """
import io, json, os, sys, tarfile
header = json.loads(sys.stdin.buffer.readline(4097))
size, data = header["size"], b""
while len(data) < size:
    chunk = sys.stdin.buffer.read(size - len(data))
    if not chunk:
        sys.exit("the inputs ended after %d of %d bytes" % (len(data), size))
    data += chunk
trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
with tarfile.open(fileobj=io.BytesIO(data)) as tar:
    tar.extractall(sys.argv[1], numeric_owner=True, **trusted)
del data
sys.argv = [sys.argv[2]] + sys.argv[3:]
import runpy
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def session_argv(layout: Layout, timeout: float, report_limit: int, test_path: str | None = None) -> list[str]:
    """The launcher in session mode (root), after :data:`SESSION_BOOT` has put the inputs in
    place: the set-up step (:func:`prepare_argv`, as the test user, in the working copy,
    under ``timeout``; its report cut at ``report_limit`` bytes), then the plans the host
    sends (:func:`plan_message`), in one exec (harness/engine/exec_session.py). With
    ``test_path`` (the test command's ``PATH``), the launcher makes root's bytecode of the
    bootstrap's modules with that ``python3`` meanwhile (harness/incontainer/bytecode_cache.py)."""
    spec = {"argv": prepare_argv(layout), "cwd": TESTBED, "timeout": timeout, "user": [TEST_UID, TEST_UID],
            "limit": report_limit}
    if test_path:
        spec["bytecode"] = {"path": test_path, "dir": incontainer.BYTECODE_DIR, "source": incontainer.PY_DIR}
    return [SYSTEM_PYTHON, "-I", "-S", "-c", SESSION_BOOT, IO_DIR, f"{TRUSTED}/launcher.py", "--session",
            json.dumps(spec, sort_keys=True)]


def inputs_message(files: dict[str, FileEntry]) -> bytes:
    """:func:`initial_files` as the session's first message (:data:`SESSION_BOOT` reads it)."""
    return archive.tar_of(files, TEST_UID)


def received_files(session, limit: int, step: str) -> dict[str, bytes] | None:
    """The output directory the session's launcher sent at the end of ``step`` (its regular
    files by name, at most ``limit`` bytes in all), or None when no such message came: the
    caller then reads the directory through the archive API."""
    message = session.receive(limit + 1024 * 1024, timeout=30, kill=False)
    if not message.ok or message.header.get("step") != step:
        return None
    return archive.regular_files(io.BytesIO(message.body), limit)


def plan_message(plan: dict) -> bytes:
    """A plan as the session's launcher reads it from its stdin (:func:`session_argv`)."""
    return json.dumps(plan).encode()


def tests_only_argv(spec: dict) -> list[str]:
    """The launcher's test step alone (``--tests-only``), for a sandbox already prepared."""
    return [SYSTEM_PYTHON, "-I", "-S", f"{TRUSTED}/launcher.py", "--tests-only", json.dumps(spec)]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def bootstrap(results_path: str | None, monitor: bool) -> dict:
    """What the launcher activates for the test command (harness/incontainer/launcher.py
    ``run_tests``): the bootstrap reaches every Python process of the environment through the
    site hook, so the test command's environment is the spec's, untouched."""
    return {"activation": incontainer.ACTIVATION, "socket": EVIDENCE_SOCKET, "results": results_path,
            "monitor": monitor}


def launch_plan(layout: Layout, plan, delete: list[str], staged: dict[str, tuple[bytes, int]], services: list[dict],
                tests: dict, setup_timeout: int, base_env: dict[str, str]) -> dict:
    """What the launcher's test step reads (``harness/incontainer/launcher.py`` documents
    each key); ``plan`` is the host's :class:`harness.integrity.plan.Plan`."""
    return {"testbed": TESTBED, "pristine": PRISTINE_TREE, "out_dir": layout.out_dir, "staged": layout.staged,
            "user": [TEST_UID, TEST_UID], "service_user": [SERVICE_UID, SERVICE_UID], "base_env": base_env,
            "setup_timeout": setup_timeout, "delete": delete, "restore": plan.restore,
            "install": [[p, mode] for p, (_, mode) in sorted(staged.items())],
            "seal": {"trees": plan.seal_trees, "files": plan.seal_files, "sticky": plan.sticky,
                     "watch": SURVEY_WATCH},
            "expected": {p: sha256(d) for p, (d, _) in staged.items()},
            "service_dir": layout.service_dir, "services": services, "tests": tests}


def build_plan(layout: Layout, argv: list[str], env: dict[str, str], bootstrap_: dict, timeout: int,
               setup_timeout: int, limits: dict[str, int]) -> dict:
    """What the launcher's build step reads: the rebuild (in ``env``, with ``bootstrap_``
    activated around it, as :func:`bootstrap` gives it; the pristine tree's retry runs
    unmonitored) and the tree report's request (``limits`` as for the set-up step)."""
    request = {"mode": "report", "hash_all": True, "testbed": TESTBED, "pristine": PRISTINE_TREE,
               "content_suffixes": [], **limits}   # the plan needs paths; the scans read the patch's tree
    path = f"{layout.report_dir}/request.json"
    return {"step": "build", "testbed": TESTBED, "pristine": PRISTINE_TREE, "out_dir": layout.out_dir,
            "user": [TEST_UID, TEST_UID], "setup_timeout": setup_timeout,
            "build": {"argv": argv, "env": env, "pristine_env": env, "bootstrap": bootstrap_, "timeout": timeout},
            "report": {"path": path, "request": request,
                       "argv": [SYSTEM_PYTHON, "-I", "-S", f"{TRUSTED}/prepare.py", path]}}
