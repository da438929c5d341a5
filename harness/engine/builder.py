"""The network-less builder: the target interpreter with a compiler
(:meth:`ImageBuilder.builder`), where source distributions become wheels and a tree's
own metadata is read. Nothing here runs on the host's Python.

Each job gets a fresh container and a virtual environment installed ``--require-hashes``
from the wheelhouse's own lock of build tools (the spec's pip/setuptools/wheel pins and
the build requirements), so a spec constrains its builds exactly as it constrains its
environment. Each sdist is built on its own, so a failure names the package and the
command; the whole output is returned for the build log.

That virtual environment is installed once per (builder image, tools lock) and kept::

    <cache>/build-tools/<key>/
        venv/           the venv, made at /venv in a builder container (its scripts and
                        pyvenv.cfg name /venv), then mounted read-only at /venv
        install.log     the installer's output (each job's log starts with it)
        COMPLETE        written last; a directory without it is never used

It is made in a temporary directory beside it and renamed into place, under a lock on the
key. Read-only, no job can change what the next one finds; the tree a job reads is
mounted read-only too and copied inside the container (the export cache is never
written). Before, each job installed the tools afresh (2-3 s) and sent the tree through the
engine's archive call (1-2.6 s for sphinx, with .git).
"""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from docker.types import Mount

from harness.engine.environment_layer import venv_install
from harness.engine.images import ImageBuilder
from harness.engine.layers import Interpreter, tar_bytes
from harness.errors import ImageBuildError
from harness.hashing import content_hash
from harness.locks import file_lock

BUILD_TIMEOUT = 1800
#: Bumped when how the build tools' venv is made changes (it is part of the cache key).
TOOLS_VENV_FORMAT = 1
TOOLS_VENV = "/venv"
#: Where a job's tree is mounted read-only; the job works on a copy at /tree.
TREE_SOURCE = "/tree-source"
#: Run with the target interpreter inside the builder: the PEP 517 metadata hook of the
#: tree's backend, or ``setup.py egg_info`` where the backend has none (old setuptools).
METADATA_SCRIPT = r'''
import glob, importlib, json, os, shutil, subprocess, sys
tree, out, backend_name, backend_path = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
os.chdir(tree)
if backend_path:
    sys.path[:0] = [os.path.join(tree, p) for p in backend_path.split(os.pathsep)]
result = {"kind": None}
try:
    module_name, _, attr = backend_name.partition(":")
    backend = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        backend = getattr(backend, part)
    hook = getattr(backend, "prepare_metadata_for_build_wheel", None)
except Exception as exc:  # an old setuptools without build_meta
    hook, result["backend_error"] = None, repr(exc)
if hook is not None:
    name = hook(out)
    result.update(kind="metadata", path=os.path.join(out, name, "METADATA"))
else:
    subprocess.check_call([sys.executable, "setup.py", "egg_info", "--egg-base", out])
    info = glob.glob(os.path.join(out, "*.egg-info"))[0]
    result.update(kind="egg-info", path=os.path.join(info, "PKG-INFO"),
                  requires=os.path.join(info, "requires.txt"))
print("HARNESS-METADATA " + json.dumps(result))
'''


@dataclass(frozen=True)
class TreeMetadata:
    name: str
    version: str
    requires_dist: tuple[str, ...]
    extras: tuple[str, ...]
    log: str


class Builder:
    def __init__(self, images: ImageBuilder, interpreter: Interpreter) -> None:
        self.images = images
        self.interpreter = interpreter

    def identity(self) -> str:
        """The builder image's tag (content-keyed): it names what an sdist is built with."""
        return self.images.builder(self.interpreter).tag

    def _container(self, env: dict[str, str] | None = None, mounts: list[Mount] | None = None,
                   tmpfs: dict[str, str] | None = None):
        image = self.images.builder(self.interpreter)
        container = self.images.client.containers.create(
            image.tag, command=["sleep", "infinity"], network_mode="none", working_dir="/build", user="0:0",
            environment={"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "HOME": "/tmp", **(env or {})},
            mounts=mounts or [], tmpfs=tmpfs or {}, labels={"org.harness.owner": "harness-builder"})
        container.start()
        return container

    def _run(self, container, script: str, timeout: int = BUILD_TIMEOUT) -> tuple[int, str]:
        code, output = container.exec_run(["/usr/bin/timeout", str(timeout), "/bin/bash", "-c", script])
        return code, output.decode(errors="replace")

    def tools_venv(self, tools_dir: Path, tools_lock: str) -> tuple[Path, str]:
        """The host directory of a venv with exactly the tools lock, made once (see the
        module's docstring), and the installer's log."""
        image = self.images.builder(self.interpreter)
        install = venv_install(self.interpreter.executable, TOOLS_VENV, "/tools", "/tools.lock")
        key = content_hash({"format": TOOLS_VENV_FORMAT, "builder": image.image_id,
                            "lock": content_hash(tools_lock, 64), "install": install})
        root = self.images.cache_dir / "build-tools"
        final = root / key
        if not (final / "COMPLETE").is_file():
            with file_lock(self.images.cache_dir / "locks", f"build-tools-{key}"):
                if not (final / "COMPLETE").is_file():
                    self._make_tools_venv(final, tools_dir, tools_lock, install)
        log = (final / "install.log").read_text(errors="replace")
        return final / "venv", f"# build tools: {final.name} (installed once, mounted read-only at {TOOLS_VENV})\n{log}"

    def _make_tools_venv(self, final: Path, tools_dir: Path, tools_lock: str, install: str) -> None:
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
        try:
            (staging / "venv").mkdir()
            container = self._container(mounts=[Mount(TOOLS_VENV, str(staging / "venv"), type="bind"),
                                                Mount("/tools", str(tools_dir), type="bind", read_only=True)])
            try:
                container.put_archive("/", tar_bytes({"tools.lock": tools_lock.encode()}))
                code, out = self._run(container, "set -e; " + install)
            finally:
                container.remove(force=True, v=True)
            if code != 0:
                raise ImageBuildError(f"installing the build tools for Python {self.interpreter.version} failed "
                                      f"(command: pip install --require-hashes -r tools.lock)", log=out)
            (staging / "install.log").write_text(out)
            (staging / "COMPLETE").write_text("")
            if final.exists():  # a directory without its marker (an interrupted or damaged one): never used
                shutil.rmtree(final, ignore_errors=True)
            os.replace(staging, final)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)

    def _mounts(self, tools_dir: Path, tools_lock: str, tree: Path | None = None) -> tuple[list[Mount], str]:
        venv, log = self.tools_venv(tools_dir, tools_lock)
        mounts = [Mount(TOOLS_VENV, str(venv), type="bind", read_only=True),
                  Mount("/tools", str(tools_dir), type="bind", read_only=True)]
        if tree is not None:
            mounts.append(Mount(TREE_SOURCE, str(tree), type="bind", read_only=True))
        return mounts, log

    def build_wheels(self, sdists: list[Path], tools_dir: Path, tools_lock: str, wheel_dir: Path,
                     env: dict[str, str] | None = None) -> str:
        """Build each sdist into a wheel in ``wheel_dir``. Returns the whole log; raises
        ImageBuildError naming the package and command when one fails."""
        mounts, venv_log = self._mounts(tools_dir, tools_lock)
        container = self._container(env, mounts)
        log = [venv_log]
        try:
            staging = {f"sdists/{p.name}": p.read_bytes() for p in sdists}
            container.put_archive("/", tar_bytes(staging))
            for sdist in sdists:
                command = (f"/venv/bin/python -m pip wheel --no-deps --no-build-isolation --no-index "
                           f"--find-links /tools -w /out /sdists/{shlex.quote(sdist.name)}")
                code, out = self._run(container, f"mkdir -p /out && {command}")
                log.append(f"$ {command}\n{out}")
                if code != 0:
                    name = sdist.name.rsplit("-", 1)[0]
                    raise ImageBuildError(f"building a wheel of {name} ({sdist.name}) for Python "
                                          f"{self.interpreter.version} failed (exit {code}); command: {command}",
                                          log="\n".join(log))
            bits, _ = container.get_archive("/out")
            raw = io.BytesIO(b"".join(bits))
            with tarfile.open(fileobj=raw) as tar:
                for member in tar.getmembers():
                    if member.isfile() and member.name.endswith(".whl"):
                        (wheel_dir / Path(member.name).name).write_bytes(tar.extractfile(member).read())
        finally:
            container.remove(force=True, v=True)
        return "\n".join(log)

    def tree_metadata(self, tree: Path, tools_dir: Path, tools_lock: str, backend: str, backend_path: str,
                      prepare: list[str], env: dict[str, str]) -> TreeMetadata:
        """The tree's own name, version and requirements, read by its build backend in
        the builder after the spec's ``prepare`` steps (setup files, pre_install)."""
        from harness.preparation.requirements import parse_egg_requires, parse_metadata
        mounts, venv_log = self._mounts(tools_dir, tools_lock, tree)
        # the copy on a tmpfs: creating a tree's files in the container's own overlay layer
        # costs about 0.6 ms each (sphinx's 4,200: 2.8 s), on a tmpfs 0.04 ms
        container = self._container(env, mounts, tmpfs={"/tree": "exec,mode=0755"})
        try:
            log = [venv_log]
            container.put_archive("/", tar_bytes({"metadata.py": METADATA_SCRIPT.encode()}))
            steps = "\n".join(prepare)
            command = (f"/venv/bin/python /metadata.py /tree /meta {shlex.quote(backend)} "
                       f"{shlex.quote(backend_path)}")
            code, out = self._run(container, f"set -e\ncp -a {TREE_SOURCE}/. /tree/\nmkdir -p /meta\ncd /tree\n{steps}\n"
                                             f"PATH=/venv/bin:$PATH {command}", timeout=600)
            log.append(f"$ {command}\n{out}")
            marker = [line for line in out.splitlines() if line.startswith("HARNESS-METADATA ")]
            if code != 0 or not marker:
                raise ImageBuildError(f"reading the tree's metadata with {backend} failed (exit {code}); "
                                      f"command: {command}", log="\n".join(log))
            result = json.loads(marker[-1].split(" ", 1)[1])
            text = _read_file(container, result["path"])
            name, version, requires, extras = parse_metadata(text)
            if result["kind"] == "egg-info":
                requires = parse_egg_requires(_read_file(container, result["requires"], missing_ok=True))
            return TreeMetadata(name, version, tuple(requires), tuple(extras), "\n".join(log))
        finally:
            container.remove(force=True, v=True)


def _read_file(container, path: str, missing_ok: bool = False) -> str:
    from docker.errors import NotFound
    try:
        bits, _ = container.get_archive(path)
    except NotFound:
        if missing_ok:
            return ""
        raise ImageBuildError(f"builder produced no {path}") from None
    with tarfile.open(fileobj=io.BytesIO(b"".join(bits))) as tar:
        member = tar.getmembers()[0]
        return tar.extractfile(member).read().decode(errors="replace")
