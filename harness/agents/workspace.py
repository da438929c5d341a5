"""The working sandbox of the agent stage: where a scaffold's commands run, and what its
tree is worth (the prediction).

A :class:`DockerWorkspace` is a sandbox started from the instance image exactly as grading
starts one (harness/engine/sandbox.py ``DockerBackend.start``: network none, read-only root,
every capability dropped but root's set-up few, no new privileges, the run's
:class:`~harness.engine.sandbox.Limits`, the run/run-dir/task/node labels, so leftover
cleanup and deadline kills remove it as they remove grading's). Its layout:

======================  ==================================================================
``/testbed``            tmpfs (``Limits.testbed_size``), owned by the harness user (uid
                        1000), 0755: the working copy, copied by that user from the pristine
                        tree when the sandbox starts: the base commit with its one-commit
                        ``.git`` (no remote, no tag, no reflog), the test patch NOT applied.
                        The agent's to change; the prediction is read from it
``/opt/harness/testbed`` the pristine tree (image, read-only)
``/opt/harness/venv``   the environment: ``python``, ``pip``, ``pytest`` first on PATH (image,
                        read-only)
``/tmp``                tmpfs (``Limits.tmp_size``), mode 1777: HOME
``/harness``            tmpfs, root's, 0755: ``workspace/`` holds the command runner and
                        stopper (harness/engine/interactive.py), root's, read-only
======================  ==================================================================

Who runs what: root runs one set-up command (hand ``/testbed`` to the harness user, copy the
pristine tree in as that user). Every command of the agent (:meth:`DockerWorkspace.run`) is a
fresh ``bash -c`` as the harness user with no capability and an empty bounding set, in
``cwd``, with exactly the grading environment's variables (harness/evaluation/setup.py
``scrubbed_env``: no hash seed fixed) plus those given; nothing but files persists between
commands. A timeout ends that command's processes only (harness/engine/interactive.py), and
output past the limit is cut, not fatal.

The prediction (:meth:`DockerWorkspace.diff`) is computed on the host (harness/agents/treediff.py,
treeread.py) from ``/testbed`` read through the archive API, against the pristine tree read the
same way (the image's, which the agent cannot change), itself recorded onto the one-commit
export (``Prepared.export_path``; the source repository when there is none). The pristine tree
is the base commit plus what the image's build changed in tracked files (requests' appended CA
in ``cacert.pem``, sphinx's ``tox.ini``): grading starts from it too, so a patch that carried
those changes would not apply there. ``against="export"`` gives the patch against the base
commit instead, which is what the agent's own ``git add -A && git diff --cached`` prints. The
sandbox's ``.git`` is never read, so a commit, a reset or a rewritten index there changes nothing.

What the agent's own git shows starts clean, as in SWE-bench's images: the pristine tree's edits
of tracked files are folded into the one commit when the sandbox starts (:data:`FOLD_SCRIPT`,
:attr:`DockerWorkspace.folded`), so ``git status`` and the scaffold's own submission hold the
agent's changes only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Generator, Mapping, Protocol

from harness.agents.treediff import BaseTree, TreeDiff, diff_tree
from harness.agents.treeread import TreeLimits
from harness.engine.interactive import dropped_to, install, open_archive, run_command
from harness.engine.layers import PRISTINE_TREE
from harness.engine.sandbox import ROOT, DockerBackend, DockerSandbox
from harness.errors import InfrastructureError
from harness.evaluation.setup import scrubbed_env
from harness.inputs.repos import GitDir
from harness.preparation.preparer import Prepared

__all__ = ["CommandResult", "DockerWorkspace", "TreeDiff", "TreeLimits", "Workspace", "open_workspace",
           "TESTBED", "OUTPUT_LIMIT"]

TESTBED = "/testbed"
#: bytes of one command's output kept (its head and its last OUTPUT_TAIL bytes)
OUTPUT_LIMIT = 1 << 20
OUTPUT_TAIL = 128 * 1024
#: the set-up command's own deadline (grading's setup_timeout)
SETUP_SECONDS = 300


@dataclass(frozen=True)
class CommandResult:
    """One command's outcome. ``output``: stdout and stderr interleaved, UTF-8 with
    replacement, capped (``truncated``: its head and tail kept, a line between says how much
    was left out); ``returncode`` None when the command was killed (``timed_out``)."""

    output: str
    returncode: int | None
    timed_out: bool
    truncated: bool
    seconds: float


class Workspace(Protocol):
    """What a scaffold adapter sees of a working sandbox; its lifecycle is apart from execution."""

    image: str
    image_id: str

    def run(self, command: str, *, cwd: str = TESTBED, timeout: float = 60,
            env: Mapping[str, str] | None = None) -> CommandResult: ...

    def diff(self) -> TreeDiff: ...  # DockerWorkspace.diff: against="pristine" by default

    def close(self) -> None: ...


class DockerWorkspace:
    """A working sandbox on a Docker engine (see the module's docstring). Not thread-safe:
    one command at a time."""

    def __init__(self, sandbox: DockerSandbox, *, image: str, image_id: str, base: BaseTree,
                 env: Mapping[str, str], user: str = "1000:1000", limits: TreeLimits | None = None,
                 scratch_dir: Path | None = None, output_limit: int = OUTPUT_LIMIT) -> None:
        """``scratch_dir``: where :meth:`diff` materialises the tree (default: the system's
        temporary directory); ``limits``: what a tree may be before it is refused."""
        self.sandbox = sandbox
        self.image = image
        self.image_id = image_id
        self.base = base
        self.env = dict(env)
        self.uid, self.gid = parse_user(user)
        self.limits = limits or TreeLimits()
        self.scratch_dir = scratch_dir
        self.output_limit = output_limit
        #: tracked files the image's build changed, folded into the one commit when it started
        self.folded: tuple[str, ...] = ()

    def run(self, command: str, *, cwd: str = TESTBED, timeout: float = 60,
            env: Mapping[str, str] | None = None) -> CommandResult:
        """Run ``bash -c command`` (see the module's docstring). Raises ValueError for an
        argument no command can have, InfrastructureError (ContainerDied) when the sandbox is
        gone or the engine fails."""
        check_arguments(command, cwd, timeout, env)
        done = run_command(self.sandbox, command, cwd=cwd, env={**self.env, **(env or {})}, timeout=timeout,
                           uid=self.uid, gid=self.gid, output_limit=self.output_limit,
                           tail_limit=min(OUTPUT_TAIL, self.output_limit // 2))
        return CommandResult(done.output, done.exit_code, done.timed_out, done.truncated, round(done.seconds, 4))

    def diff(self, *, against: str = "pristine") -> TreeDiff:
        """The tree's patch (tree truth): against the pristine tree the agent was given
        (default), or ``against="export"``, the base commit's tree (what ``git add -A && git
        diff --cached`` prints in the sandbox, the image's own changes to tracked files
        included). Raises WorkingTreeRefused when the tree cannot be one (past a limit, or a
        path no patch holds), InfrastructureError when the engine or host git fails."""
        if against not in ("pristine", "export"):
            raise ValueError(f"against is 'pristine' or 'export', got {against!r}")
        streams = [self._archive(TESTBED)]
        if against == "pristine":
            streams.append(self._archive(PRISTINE_TREE))
        try:
            return diff_tree(streams[0], TESTBED.rsplit("/", 1)[1], self.base, self.limits, self.scratch_dir,
                             (streams[1], PRISTINE_TREE.rsplit("/", 1)[1]) if len(streams) > 1 else None)
        finally:
            for stream in streams:
                stream.close()

    def _archive(self, path: str) -> Generator[bytes, None, None]:
        """The tar stream of ``path``, opened when first read and closed with the generator."""
        chunks = open_archive(self.sandbox, path)
        if chunks is None:
            raise InfrastructureError(f"{path} is missing from sandbox {self.sandbox.id[:12]}")
        try:
            yield from chunks
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    def close(self) -> None:
        """Remove the sandbox and its volumes. Never raises."""
        self.sandbox.close()

    def __enter__(self) -> "DockerWorkspace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_user(user: str) -> tuple[int, int]:
    """``"1000:1000"`` → (1000, 1000); a bare uid is its own gid."""
    uid, _, gid = user.partition(":")
    try:
        return int(uid), int(gid or uid)
    except ValueError:
        raise ValueError(f"a sandbox user is 'UID[:GID]', got {user!r}") from None


def check_arguments(command: str, cwd: str, timeout: float, env: Mapping[str, str] | None) -> None:
    """Refuse what no command can have (raised as ValueError, a caller's bug)."""
    if not isinstance(command, str) or "\0" in command:
        raise ValueError("a command is a string without NUL bytes")
    if not isinstance(cwd, str) or not cwd.startswith("/") or "\0" in cwd:
        raise ValueError(f"cwd must be an absolute path, got {cwd!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
            or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise ValueError(f"an environment variable's name is a non-empty string without '=' or NUL: {key!r}")
        if not isinstance(value, str) or "\0" in value:
            raise ValueError(f"the value of {key} is not a string without NUL bytes")


def base_of(prepared: Prepared) -> BaseTree:
    """The base tree the workspace's diff is taken against: the export's (its tree id is
    ``Prepared.tree_sha``), or the source repository's objects when there is no export."""
    repo = GitDir(prepared.export_path or prepared.repo_path)
    return BaseTree(Path(repo.git_dir) / "objects", prepared.tree_sha)


def setup_command(uid: int, gid: int) -> list[str]:
    """Root hands /testbed to the harness user, who copies the pristine tree in (as
    grading's set-up step resets it, as the test user)."""
    copy = " ".join([*dropped_to(uid, gid), "cp", "-a", f"{PRISTINE_TREE}/.", f"{TESTBED}/"])
    return ["/bin/sh", "-c", f"chown {uid}:{gid} {TESTBED} && chmod 0755 {TESTBED} && exec {copy}"]


#: Run as the harness user in /testbed after the copy. The image's build may have changed tracked
#: files (requests' appended CA in ``cacert.pem``, sphinx's ``tox.ini``); SWE-bench's images commit
#: such edits after their set-up (``git commit -am``), so an agent there starts from a clean
#: ``git status`` and its ``git add -A && git diff --cached`` holds its own changes only. Here the
#: edits are folded into the one commit instead (a new root commit of the same message, author and
#: dates; no reflog), so the history stays one commit and ``git log --all`` shows nothing else.
#: Prints the folded paths, one per line, after the marker.
FOLD_MARKER = "harness-folded:"
FOLD_SCRIPT = f"""set -e
cd {TESTBED}
export HOME=/tmp GIT_CONFIG_NOSYSTEM=1
if git diff --quiet HEAD --; then echo '{FOLD_MARKER}'; exit 0; fi
echo '{FOLD_MARKER}'
git diff --name-only HEAD --
git add -u
export GIT_AUTHOR_NAME="$(git show -s --format=%an HEAD)" GIT_AUTHOR_EMAIL="$(git show -s --format=%ae HEAD)"
export GIT_AUTHOR_DATE="$(git show -s --format=%ad --date=raw HEAD)"
export GIT_COMMITTER_NAME="$(git show -s --format=%cn HEAD)" GIT_COMMITTER_EMAIL="$(git show -s --format=%ce HEAD)"
export GIT_COMMITTER_DATE="$(git show -s --format=%cd --date=raw HEAD)"
commit=$(git show -s --format=%B HEAD | git commit-tree "$(git write-tree)")
git -c core.logAllRefUpdates=false update-ref HEAD "$commit"
"""


def fold_command(uid: int, gid: int) -> list[str]:
    return [*dropped_to(uid, gid), "/bin/sh", "-c", FOLD_SCRIPT]


def folded_paths(output: str) -> tuple[str, ...]:
    """The paths :data:`FOLD_SCRIPT` folded into the commit (its output after the marker)."""
    _, _, after = output.partition(FOLD_MARKER)
    return tuple(line for line in after.splitlines() if line.strip())


def open_workspace(backend: DockerBackend, prepared: Prepared, *, name_hint: str, task: str = "",
                   limits: TreeLimits | None = None, scratch_dir: Path | None = None) -> DockerWorkspace:
    """Start a working sandbox from ``prepared``'s instance image (see the module's
    docstring). ``task``: the token deadline kills find it by. Raises InfrastructureError
    when the engine fails or the copy does not complete (the sandbox is removed then)."""
    base = base_of(prepared)
    uid, gid = parse_user(backend.user)
    sandbox = backend.start(prepared.image.tag, name_hint, task=task, cpus=prepared.spec.cpus)
    try:
        result = sandbox.exec(setup_command(uid, gid), workdir="/", timeout=SETUP_SECONDS, output_limit=64 * 1024,
                              user=ROOT)
        if not result.ok:
            raise InfrastructureError(f"populating {TESTBED} from {PRISTINE_TREE} failed (exit {result.exit_code}): "
                                      f"{result.output[-1000:]}")
        fold = sandbox.exec(fold_command(uid, gid), workdir="/", timeout=SETUP_SECONDS, output_limit=256 * 1024,
                            user=ROOT)
        if not fold.ok or FOLD_MARKER not in fold.output:
            raise InfrastructureError(f"folding the image's edits of tracked files into {TESTBED}'s commit failed "
                                      f"(exit {fold.exit_code}): {fold.output[-1000:]}")
        install(sandbox)
    except BaseException:
        sandbox.close()
        raise
    workspace = DockerWorkspace(sandbox, image=prepared.image.tag, image_id=prepared.image.image_id, base=base,
                                env=scrubbed_env(prepared.spec), user=backend.user, limits=limits,
                                scratch_dir=scratch_dir)
    workspace.folded = folded_paths(fold.output)
    return workspace
