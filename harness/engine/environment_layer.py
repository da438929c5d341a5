"""The environment layer's build: a root-owned virtual environment installed offline from the
host's wheelhouse, committed from a build container in one layer.

The build container is a network-less container of the parent image (the interpreter, or the
interpreter with the compiler). The wheelhouse is bind-mounted read-only at ``/mnt`` (hard
links of its wheels in a directory of the cache: a mount point the image does not have would
be created in the container and committed with it); its wheels are
copied to ``/opt/harness/wheels`` (root's, as a Dockerfile ``COPY`` made them: the sandboxes
install offline from there), the venv is installed from them with hashes, the site hook is
put in place, and the container is committed with the parent's configuration plus the
variables below and the layer's labels. Each local service gets its own venv in the same
container, the same way.

A Dockerfile build made the same files in five layers and about ten steps (each a container
and a commit): the harness tarred the wheelhouse into the build context, the engine unpacked
it, ``COPY`` wrote it into a layer and the commit wrote it again. Here the wheels are written
once into the container and once by the commit.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from docker.types import Mount

from harness import incontainer
from harness.engine.layers import (BUILD_INPUT_MOUNT, PYTHON, VENV, LayerBuilder, commit_image, tar_bytes,
                                   with_variables)
from harness.errors import ImageBuildError

WHEELS = "/opt/harness/wheels"
LOCK = "/opt/harness/requirements.lock"
SITE_HOOK_SOURCE = "/opt/harness/site-hook.pth"
#: What the layer sets in the image's configuration (the Dockerfile's ``ENV`` did the same).
VARIABLES = {"PATH": f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": WHEELS, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
BUILD_TIMEOUT = 3600
#: Bumped when how an environment is built changes (2: committed from a build container; 1: a
#: Dockerfile build). An input of the environment's tag, so every image a run uses was made by
#: the code that runs.
LAYOUT = 2


def venv_install(python: str, venv: str, wheels: str, lock: str) -> str:
    """Shell: a venv without the interpreter's own bundled pip, then pip from the lock's
    own pip wheel installs the whole lock (pip included) offline with hashes.

    The venv's interpreter is a copy, not a symlink: a tool that links to
    ``sys.executable`` elsewhere (tox-current-env's ``.tox/<env>/bin/python``, as sphinx's
    tests run) must still find the venv (CPython resolves symlinks of its executable
    before it looks for ``pyvenv.cfg``), as it does in SWE-bench's conda environments."""
    return (f"{python} -m venv --copies --without-pip {venv}; "
            f"pipwhl=$(ls {wheels}/pip-*.whl | head -n1); "
            f"{venv}/bin/python \"$pipwhl/pip\" install --quiet --no-index --no-deps --disable-pip-version-check "
            f"--no-warn-script-location --find-links {wheels} --require-hashes -r {lock}")


def install_script(executable: str, services: list[tuple[Any, str, Path]]) -> str:
    """The build, as root in the build container (bash). ``services``: (ServiceSpec, lock text,
    wheel dir)."""
    copy = "cp -a --no-preserve=ownership"
    lines = ["set -e",
             f"{copy} {BUILD_INPUT_MOUNT}/main {WHEELS}", f"chmod 755 {WHEELS}",
             venv_install(executable, VENV, WHEELS, LOCK),
             f"{PYTHON} -m pip freeze --all > /opt/harness/installed.txt",
             incontainer.site_hook_shell(PYTHON, SITE_HOOK_SOURCE),
             incontainer.site_hook_shell(executable, SITE_HOOK_SOURCE),
             f"chmod -R go-w {VENV}"]
    if services:   # the services were built after the layer's variables were set (a Dockerfile's ENV)
        lines += [f"export {name}={shlex.quote(value)}" for name, value in VARIABLES.items()]
    for svc, _, _ in services:
        home = f"/opt/harness/services/{svc.name}"
        lines += [f"{copy} {BUILD_INPUT_MOUNT}/services/{shlex.quote(svc.name)} {home}/wheels", f"chmod 755 {home}/wheels",
                  venv_install(executable, home + "/venv", home + "/wheels", home + "/requirements.lock"),
                  f"PATH={home}/venv/bin:$PATH bash {home}/build.sh",
                  f"chmod -R go-w {home}"]
    return "\n".join(lines) + "\n"


def build_environment(images: LayerBuilder, tag: str, parent_id: str, executable: str, lock_text: str,
                      wheel_dir: Path, services: list[tuple[Any, str, Path]], labels: dict[str, str]) -> None:
    """Build the environment image ``tag`` on the image ``parent_id`` (see the module's text).
    The whole log is kept; a failed step raises ImageBuildError with it."""
    client = images.client
    config = client.images.get(parent_id).attrs["Config"]
    files = {LOCK.lstrip("/"): lock_text.encode(), SITE_HOOK_SOURCE.lstrip("/"): incontainer.site_hook("")[1]}
    for svc, lock, _ in services:
        home = f"opt/harness/services/{svc.name}"
        files[f"{home}/requirements.lock"] = lock.encode()
        files[f"{home}/build.sh"] = ("set -e\ncd /" + home + "\n" + "\n".join(svc.build) + "\n").encode()
    script = install_script(executable, services)
    stage = Path(tempfile.mkdtemp(prefix="env-wheels-", dir=images.cache_dir))
    started = time.monotonic()
    try:
        _link_tree(Path(wheel_dir), stage / "main")
        for svc, _, svc_wheels in services:
            _link_tree(Path(svc_wheels), stage / "services" / svc.name)
        # no labels, user or working directory of its own: a commit keeps them in the image (the
        # build runs as root by its own exec)
        container = client.containers.create(parent_id, command=["sleep", "infinity"], network_mode="none",
                                             mounts=[Mount(target=BUILD_INPUT_MOUNT, source=str(stage), type="bind",
                                                           read_only=True)])
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    try:
        container.start()
        container.put_archive("/", tar_bytes(files))
        code, output = container.exec_run(["/usr/bin/timeout", str(BUILD_TIMEOUT), "/bin/bash", "-c", script],
                                          user="0:0", workdir="/")
        log = output.decode(errors="replace")
        if code != 0:
            path = images.keep_log(tag, f"# the environment, in a build container of {parent_id} (failed, exit {code})\n"
                                        f"# script\n{script}\n# output\n{log}")
            raise ImageBuildError(f"building {tag} failed: its install exited with {code}", log=log,
                                  log_path=str(path))
        container.kill()   # sleep, as process 1, ignores a stop's SIGTERM
        commit_image(container, config, tag, labels, with_variables(config.get("Env") or [], VARIABLES))
        images.keep_log(tag, f"# the environment, in a build container of {parent_id}, committed "
                             f"({time.monotonic() - started:.1f} s)\n# script\n{script}\n# output\n{log}")
    finally:
        container.remove(force=True, v=True)
        shutil.rmtree(stage, ignore_errors=True)


def _link_tree(source: Path, target: Path) -> None:
    """``target`` a copy of the directory ``source`` made of hard links (copies where a link
    cannot be made, as across file systems)."""
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target, copy_function=link, symlinks=True)
