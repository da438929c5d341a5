"""The instance layer: the exported one-commit repository, installed.

Identical content shares one image whatever the instance id: the tag is
``harness-inst:<repo>-<hash>`` where the hash covers the environment image, the tree
hash, the install steps, the spec's environment variables and the compiler mode.

Without install steps the layer is the tree alone (``ADD testbed.tar``). With them, the
install runs in a network-less *build container*:

* ``compiler: none`` (most specs): a container of the environment image gets the tree at
  ``/opt/harness/testbed``; the install runs in a copy at ``/testbed``, a tmpfs of that
  container; the files it created or changed are copied back into the pristine tree; the
  container is committed as the instance image (one layer: the tree, what the install wrote
  there and what it added to the virtual environment). The copy at /testbed is never part
  of the image: creating a tree's files in a container's overlay layer is the slow part of
  a build here (about 0.6 ms a file), and a tmpfs's copy is gone with the container.
* ``compiler: keep|build``: a container of the environment with the compiler, with a
  compiler cache mounted from the host (``<cache>/ccache/<interpreter>``; ccache keys on the
  preprocessed source and the compiler's content, so instances of a version reuse each
  other's compilation). The result — the whole tree after the install at
  ``/opt/harness/testbed`` (build artefacts included, so a later rebuild is incremental) and
  the files the install added to the virtual environment — is copied out as one tar and
  added in one layer on top of the environment image (``build``) or of the environment with
  the compiler (``keep``). The test image of ``build`` therefore never holds the compiler.

A further instance of a version whose tree differs from an earlier instance's in no build
input is a small layer on that instance's image instead (:mod:`harness.engine.instance_reuse`);
one that differs in compiled sources and packaging declarations only is that image rebuilt
incrementally, verified, and otherwise built in full (:mod:`harness.engine.incremental`).
"""

from __future__ import annotations

import json
import shutil
import shlex
import tarfile
import tempfile
import time
from pathlib import Path

from docker.types import Mount

from harness.engine import incremental
from harness.engine import instance_reuse as reuse
from harness.engine.layers import (IMAGE_FORMAT, LABEL_PREFIX, PRISTINE_TREE, VENV, ImageRef, LayerBuilder, commit_instance,
                                   put_tree_shell, tag_safe, tar_bytes, tree_mount, tree_tarinfo,
                                   with_variables)
from harness.errors import ImageBuildError
from harness.hashing import content_hash
from harness.inputs.repos import GitDir
from harness.inputs.specs import EnvSpec

INSTALL_TIMEOUT = 3600
CCACHE = "/opt/harness/ccache"
STAMP = "/opt/harness/.install-stamp"
CCACHE_ENV = {"CCACHE_DIR": CCACHE, "CCACHE_COMPILERCHECK": "content", "CCACHE_NOHASHDIR": "1",
              "CCACHE_SLOPPINESS": "time_macros,include_file_mtime,include_file_ctime,file_stat_matches",
              "CCACHE_MAXSIZE": "4G", "CCACHE_UMASK": "002"}
#: Appended to the compiler flags of image builds (not of the sandbox's own rebuilds): no
#: debug information. GCC's code does not depend on -g, so the extensions behave the same; the
#: builds take about 18 % less CPU (astropy 5.1's extensions, 54 → 44 CPU-s) and the objects
#: and shared libraries they leave in the image are 3.6 times smaller (17 → 4.7 MB of .so).
NO_DEBUG_INFO = "-g0"


def build_env(spec: EnvSpec) -> dict[str, str]:
    """The variables a compiling image build adds: the compiler cache's, and the spec's own
    CFLAGS/CXXFLAGS (if it sets them) with :data:`NO_DEBUG_INFO` after them (the last -g wins)."""
    own = dict(spec.env)
    return {**CCACHE_ENV, **{name: f"{own.get(name, '')} {NO_DEBUG_INFO}".strip() for name in ("CFLAGS", "CXXFLAGS")}}


def install_script(spec: EnvSpec) -> str:
    """The install, run as root in the build container (the tree is at /testbed there,
    where containers see their working copy). A failing step names itself."""
    writes = [f"mkdir -p \"$(dirname {shlex.quote(path)})\" && printf %s {shlex.quote(content)} > {shlex.quote(path)}"
              for path, content in spec.setup_files]
    steps = [*spec.pre_install, spec.install] if spec.install else [*spec.pre_install]
    lines = ["set -eE", "trap 'echo \"harness: install step failed (exit $?): $BASH_COMMAND\" >&2' ERR",
             "cd /testbed", *writes, *steps]
    return "\n".join(lines) + "\n"


def build_instance(images: LayerBuilder, name_hint: str, spec: EnvSpec, env: ImageRef, tree_dir: Path,
                   tree_sha: str, *, compiler_env: ImageRef | None = None, ccache_key: str = "",
                   tree_time: int | None = None) -> ImageRef:
    """The instance image for ``tree_dir`` on ``env``. ``compiler_env`` is the
    environment with the compiler (required when ``spec.compiler`` is not "none");
    ``tree_time`` the source commit's time (an instance is only built on earlier ones)."""
    script = install_script(spec)
    has_install = bool(spec.install or spec.pre_install or spec.setup_files)
    if spec.compiler != "none" and compiler_env is None:
        raise ImageBuildError(f"spec {spec.repo}@{spec.version} asks for a compiler but none was prepared")
    final_parent = compiler_env if spec.compiler == "keep" else env
    env_lines = "".join(f"ENV {k}={json.dumps(v)}\n" for k, v in spec.env)
    inputs = {"format": IMAGE_FORMAT, "layout": LAYOUT, "env": env.image_id, "parent": final_parent.image_id, "tree": tree_sha,
              "script": content_hash(script, 64), "env_vars": dict(spec.env), "compiler": spec.compiler,
              "downloads": [[digest, to] for _, digest, to in spec.downloads],
              "build_parent": compiler_env.image_id if (compiler_env and spec.compiler != "none") else None,
              **({"build_flags": NO_DEBUG_INFO} if spec.compiler != "none" else {})}
    inputs_hash = content_hash(inputs)
    tag = f"harness-inst:{tag_safe(name_hint)[:60]}-{inputs_hash}"

    def build() -> None:
        labels = images.labels("inst", inputs_hash, inputs)
        labels[f"{LABEL_PREFIX}.tree-sha"] = tree_sha
        labels[f"{LABEL_PREFIX}.compiler"] = spec.compiler
        with tempfile.TemporaryDirectory(prefix="harness-ctx-") as tmp:
            tree_tar = Path(tmp) / "testbed.tar"

            def whole_tree() -> Path:
                # only the paths that put the whole tree in need it (not a small layer on an
                # earlier instance, nor an incremental rebuild)
                if not tree_tar.exists():
                    with tarfile.open(tree_tar, "w") as tar:
                        tar.add(str(tree_dir), arcname=".", filter=tree_tarinfo)
                return tree_tar
            if not has_install:
                dockerfile = f"FROM {final_parent.tag}\n{env_lines}ADD testbed.tar {PRISTINE_TREE}/\nWORKDIR /testbed\n"
                images.docker_build(tag, dockerfile, {"testbed.tar": whole_tree()}, labels)
                return
            family = reuse.family_key(inputs)
            labels[f"{LABEL_PREFIX}.family"] = family
            delta = Path(tmp) / "delta.tar"
            # an earlier image can be rebuilt only if it kept the compiler and its build directory
            rebuildable = spec.compiler == "keep" and bool(spec.reinstall_command)
            planned, why = reuse.plan(images, family, tree_dir, spec.compiled_sources, tree_time,
                                      rebuildable=rebuildable, build_inputs=spec.build_inputs)
            declared = None
            if planned is not None and planned.touched:
                labels[f"{LABEL_PREFIX}.reused-from"] = planned.base.tag
                labels[f"{LABEL_PREFIX}.rebuilt"] = "incremental"
                try:
                    _, declared = incremental.rebuild(images, planned, spec, tree_dir, tag, labels, ccache_key,
                                                        build_env(spec), CCACHE)
                    rewritten = planned.base.rewritten
                    note = (f"# rebuilt incrementally on {planned.base.tag} (same version; build inputs changed: "
                            f"{', '.join(planned.touched[:20])})\n")
                except incremental.NotIncremental as exc:
                    why = f"an incremental rebuild on {planned.base.tag} does not apply: {exc}"
                    del labels[f"{LABEL_PREFIX}.reused-from"], labels[f"{LABEL_PREFIX}.rebuilt"]
                    planned = None
            elif planned is not None:
                reuse.write_delta(planned, tree_dir, delta, images.bases.uid)
                labels[f"{LABEL_PREFIX}.reused-from"] = planned.base.tag
                removal = reuse.commit_small_layer(images, planned.base.tag, delta, tag, labels)
                images.keep_log(tag, f"# committed on {planned.base.tag}: the delta added, the listed files removed\n"
                                     f"# output of the removal\n{removal}")
                rewritten = planned.base.rewritten
                note = (f"# built on {planned.base.tag} (same version, no build input changed): "
                        f"{len(planned.changed)} files changed, {len(planned.deleted)} removed, "
                        f"{len(planned.git_changed)} .git files new, {len(planned.git_deleted)} removed\n")
            if planned is None:
                if spec.compiler == "none" and not spec.downloads:
                    # no compiler cache to mount: the install committed in one layer
                    log, written = _install_committed(images, env, spec, tag, tree_dir, script, labels)
                else:
                    build_parent = compiler_env if spec.compiler != "none" else env
                    log, written = _install_in_container(images, build_parent, spec, tree_dir, script, delta,
                                                         ccache_key)
                    dockerfile = f"FROM {final_parent.tag}\n{env_lines}ADD delta.tar /\nWORKDIR /testbed\n"
                    images.docker_build(tag, dockerfile, {"delta.tar": delta}, labels)
                tracked = {e.path for e in GitDir(tree_dir).ls_tree("HEAD")}
                rewritten = tuple(sorted(p for p in written if p in tracked))
                note = f"# full install ({why})\n# install script\n{script}\n# install output\n{log}\n\n"
            reuse.BuildRecord(inputs_hash, family, tag, str(tree_dir), rewritten, tree_time, declared).save(
                reuse.records_dir(images))
            path = images.log_path(tag)
            path.write_text(note + path.read_text())

    return images.cached(tag, "inst", inputs_hash, build, parent_id=env.image_id)


WRITTEN = "/opt/harness/.install-written"
#: Bumped when how an instance layer is built changes (4: the tree is copied into the build
#: container from a read-only mount of the export, a further instance's small layer is one
#: commit; the files are 3's; 3: an install without a compiler is
#: committed from a build container, one layer; 2: what the install wrote is copied back with
#: tar under bash; layout 1 ran a bash-only loop under /bin/sh and copied nothing).
LAYOUT = 4


def _install_committed(images: LayerBuilder, env: ImageRef, spec: EnvSpec, tag: str, tree_dir: Path,
                       script: str, labels: dict) -> tuple[str, list[str]]:
    """The install in a build container of the environment image, committed as the instance
    image (one layer on ``env``). The tree goes to the pristine location once; the install
    runs in a copy at /testbed, a tmpfs of the build container (creating a tree's files in a
    container's own overlay layer costs about 0.6 ms each on this kind of machine: sympy's
    3,600, 2.5 s of system time, where a tmpfs takes 0.2 s; the copy is gone with the
    container, so nothing is deleted either); only the files the install created or changed
    are copied back into the pristine tree, so the layer holds them, not a second copy of the
    tree. Returns (log, the files it wrote).

    The image's configuration is the environment's, with the spec's variables, /testbed as the
    working directory and this instance's labels: what the Dockerfile build (``ADD``, ``COPY``,
    ``RUN``; layout 2) made, in one layer instead of three and without copying the tree twice."""
    client, uid = images.client, images.bases.uid
    base = client.images.get(env.image_id)
    # no owner label and no user: a commit keeps the container's labels and user in the image
    # (each step runs as root by its own exec)
    container = client.containers.create(env.image_id, command=["sleep", "infinity"], network_mode="none",
                                         working_dir="/", tmpfs={"/testbed": "exec,mode=0755"},
                                         mounts=[tree_mount(tree_dir)])
    started = time.monotonic()
    try:
        container.start()
        _put_tree(container, tree_dir)
        container.put_archive("/opt/harness", tar_bytes({"install.sh": script.encode()}))
        run = (f"set -e; touch {STAMP}; cp -a --no-preserve=ownership {PRISTINE_TREE}/. /testbed/; "
               f"bash /opt/harness/install.sh; "
               f"cd /testbed; find . -path ./.git -prune -o ! -type d -newer {STAMP} -print0 > {WRITTEN}; "
               f"tar -c --null --no-recursion -T {WRITTEN} --owner={uid} --group={uid} --numeric-owner -f - "
               f"| tar -x -p -C {PRISTINE_TREE} -f -; "
               f"find {PRISTINE_TREE} -mindepth 1 -type d -newer {STAMP} -exec chown {uid}:{uid} {{}} +; "
               f"cd /; rm -f {STAMP}")
        code, output = container.exec_run(["/bin/bash", "-o", "pipefail", "-c", run], workdir="/", user="0:0",
                                          environment=dict(spec.env))
        log = output.decode(errors="replace")
        if code != 0:
            path = images.keep_log(tag, f"# the install, in a build container of {env.tag} (failed, exit {code})\n"
                                        f"# run\n{run}\n# output\n{log}")
            raise _install_failed(spec, code, log, str(path))
        code, listed = container.exec_run(["cat", WRITTEN], user="0:0")
        if code != 0:
            raise ImageBuildError(f"the install of {spec.repo}@{spec.version} left no list of what it wrote", log=log)
        container.kill()
        config = base.attrs["Config"]
        commit_instance(container, config, tag, labels, with_variables(config.get("Env") or [], dict(spec.env)))
        seconds = time.monotonic() - started
        images.keep_log(tag, f"# the install, in a build container of {env.tag}, committed ({seconds:.1f} s)\n"
                             f"# run\n{run}\n# output\n{log}")
    finally:
        container.remove(force=True, v=True)
    written = [p[2:] for p in listed.decode(errors="surrogateescape").split("\0") if p.startswith("./")]
    return "(the install ran in a build container: its output is in this log below)", written


def _install_failed(spec: EnvSpec, code: int, log: str, log_path: str | None = None) -> ImageBuildError:
    """The error of a failed install: the package it failed at and the step (the install
    script's trap names it), with the whole output."""
    from harness.preparation.requirements import failing_package
    failed = [line for line in log.splitlines() if line.startswith("harness: install step failed")]
    step = failed[-1].split(": ", 2)[-1] if failed else "(see the log)"
    return ImageBuildError(f"installing {spec.repo}@{spec.version} failed (exit {code}) at package "
                           f"{failing_package(log) or spec.repo}; command: {step}", log=log, log_path=log_path)


def _install_in_container(images: LayerBuilder, parent: ImageRef, spec: EnvSpec, tree_dir: Path, script: str,
                          delta: Path, ccache_key: str) -> tuple[str, list[str]]:
    client = images.client
    mounts = []
    env = {**dict(spec.env), "HOME": "/tmp", "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    if spec.compiler != "none":
        host_cache = images.cache_dir / "ccache" / (ccache_key or "default")
        host_cache.mkdir(parents=True, exist_ok=True)
        mounts.append(Mount(target=CCACHE, source=str(host_cache), type="bind"))
        env.update(build_env(spec))
        env["PATH"] = f"/usr/lib/ccache:{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    container = client.containers.create(parent.tag, command=["sleep", "infinity"], network_mode="none",
                                         user="0:0", working_dir="/", environment=env,
                                         mounts=[*mounts, tree_mount(tree_dir)],
                                         labels={"org.harness.owner": "harness-builder"})
    started = time.monotonic()
    try:
        container.start()
        _put_tree(container, tree_dir)
        container.put_archive("/opt/harness", tar_bytes({"install.sh": script.encode()}, 0o755))
        for url, digest, to in spec.downloads:
            data = fetch_download(images.cache_dir, url, digest)
            container.exec_run(["mkdir", "-p", str(Path(to).parent)])
            container.put_archive(str(Path(to).parent), tar_bytes({Path(to).name: data}, 0o755))
        prepare = (f"touch {STAMP}; rm -rf /testbed; cp -a {PRISTINE_TREE} /testbed")
        collect = (f"cd /; rm -rf {PRISTINE_TREE}; mv /testbed {PRISTINE_TREE}; mkdir /testbed; "
                   f"chown -R {images.bases.uid}:{images.bases.uid} {PRISTINE_TREE} /testbed; "
                   f"tar -cf /tmp/delta.tar {PRISTINE_TREE.lstrip('/')}; "
                   f"find {VENV.lstrip('/')} -newer {STAMP} ! -type d -print0 > /tmp/venv.list; "
                   "if [ -s /tmp/venv.list ]; then tar -rf /tmp/delta.tar --null --no-recursion -T /tmp/venv.list; fi")
        code, output = container.exec_run(["/usr/bin/timeout", str(INSTALL_TIMEOUT), "/bin/bash", "-c",
                                           f"{prepare} && bash /opt/harness/install.sh"], workdir="/")
        log = output.decode(errors="replace")
        if code != 0:
            raise _install_failed(spec, code, log)
        code, output = container.exec_run(["/bin/bash", "-c", collect], workdir="/")
        if code != 0:
            raise ImageBuildError(f"collecting the installed tree failed: {output.decode(errors='replace')[-2000:]}")
        code, listed = container.exec_run(["/bin/bash", "-c", f"cd {PRISTINE_TREE} && find . -path ./.git -prune -o "
                                                              f"-type f -newer {STAMP} -print0"], workdir="/")
        written = [p[2:] for p in listed.decode(errors="surrogateescape").split("\0") if p.startswith("./")]
        bits, _ = container.get_archive("/tmp/delta.tar")
        with tempfile.TemporaryFile() as outer:
            for chunk in bits:
                outer.write(chunk)
            outer.seek(0)
            with tarfile.open(fileobj=outer) as tar:
                member = tar.getmembers()[0]
                source = tar.extractfile(member)
                with open(delta, "wb") as handle:
                    shutil.copyfileobj(source, handle, 1 << 20)
        return log + f"\n# install and collect: {time.monotonic() - started:.1f} s\n", written
    finally:
        container.remove(force=True, v=True)


def _put_tree(container, tree_dir: Path) -> None:
    """The exported tree at the pristine location of a build container that mounts it."""
    code, output = container.exec_run(["/bin/bash", "-o", "pipefail", "-c", put_tree_shell()], user="0:0", workdir="/")
    if code != 0:
        raise ImageBuildError(f"copying the exported tree {tree_dir} into the build container failed (exit {code})",
                              log=output.decode(errors="replace"))


def fetch_download(cache_dir: Path, url: str, digest: str) -> bytes:
    """A spec's download, from ``<cache>/downloads/<sha256>`` or fetched (and checked)."""
    import hashlib
    import urllib.request
    path = Path(cache_dir) / "downloads" / digest
    if path.exists() and hashlib.sha256(path.read_bytes()).hexdigest() == digest:
        return path.read_bytes()
    try:
        with urllib.request.urlopen(url, timeout=300) as response:
            data = response.read()
    except OSError as exc:
        raise ImageBuildError(f"downloading {url} (a spec download) failed: {exc}") from None
    got = hashlib.sha256(data).hexdigest()
    if got != digest:
        raise ImageBuildError(f"{url}: sha256 {got} is not the spec's {digest}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data
