"""A further instance whose tree changed compiled sources: the earlier instance rebuilt in place.

:mod:`harness.engine.instance_reuse` picks the earlier instance image of the same family
(same environment, compiler, install steps) nearest to the new tree. When the trees differ
in compiled sources (``spec.compiled_sources``) and packaging declarations only, and the
spec keeps its compiler (``compiler: keep``, so the earlier image has it and its build
directory), a build container of that image gets the new tree and runs the spec's
*rebuild* command (``reinstall``, the one the harness already trusts after a patch to a
compiled source) in place, and the container is committed as the new instance image.

Correctness does not rest on timestamps the export carries (every tracked file of every
export has the same mtime) but on content:

1. *Which files changed* is read from the two commits' trees (blob ids), not from mtimes.
   Changed files are dated after the stamp of this build so that ``build_ext``'s and
   Cython's make-style checks rebuild exactly what depends on them; afterwards they get
   the tree's mtime again, so the image's tree looks like a full install's (sources old,
   artefacts new) and a later patch is rebuilt the same way.
2. *What the project declares* (:mod:`harness.engine.declared`: its metadata, packages and
   every extension module's full definition) is read before and after. An extension whose
   definition changed (sources added or removed, macros, libraries) or that is gone has its
   built module removed first, so it is linked again or stays absent — a changed definition
   never leaves a stale ``.so`` behind. If the metadata or packages differ, what the install
   puts into the environment differs: the spec's whole install command runs (on the built
   tree, so it too compiles only what changed, and its editable install writes the new
   metadata) instead of the rebuild command alone.
3. *Afterwards it is verified*: every declared extension module is built in place, each
   one built now imports, and the installed distribution has the declared version. Any failure —
   reading the declarations, the rebuild, the check — falls back to the full install.

The image holds only what the rebuild changed (the container's own layer): the changed and
removed files of the tree and its ``.git``, the rebuilt artefacts.
"""

from __future__ import annotations

import json
import shlex
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import docker.errors
from docker.types import Mount

from harness.engine.layers import PRISTINE_TREE, TREE_MTIME, VENV, LayerBuilder, commit_instance, tar_bytes
from harness.engine.instance_reuse import Delta, delete_listed, write_delta
from harness.errors import ImageBuildError
from harness.inputs.repos import GitDir
from harness.inputs.specs import EnvSpec

WORK = "/opt/harness/.incremental"
STAMP = f"{WORK}.stamp"
DECLARED = Path(__file__).with_name("declared.py")
#: Fields of a declaration that decide what the install puts into the environment.
INSTALLED_FIELDS = ("name", "version", "metadata", "install_requires", "extras_require", "entry_points", "packages",
                    "py_modules", "package_dir")
REBUILD_TIMEOUT = 1800
#: Reading a project's declarations or verifying a rebuild takes about a second (astropy's
#: setup.py included); one that runs longer is stuck, and waiting it out costs more than the
#: full install it falls back to.
DECLARE_TIMEOUT = 120


class NotIncremental(Exception):
    """The incremental rebuild does not apply (or failed): build the instance in full."""


@dataclass(frozen=True)
class Changes:
    """How two declarations of a project differ."""
    installed: tuple[str, ...]      # INSTALLED_FIELDS that differ (non-empty: the install must run)
    redefined: tuple[str, ...]      # extensions whose definition changed
    removed: tuple[str, ...]        # extensions declared before only
    stale_outputs: tuple[str, ...]  # built modules to delete before the rebuild


def compare(old: dict, new: dict) -> Changes:
    """What differs between the declarations ``old`` and ``new`` (pure)."""
    installed = tuple(f for f in INSTALLED_FIELDS if old.get(f) != new.get(f))
    before = {e["name"]: e for e in old.get("extensions", [])}
    after = {e["name"]: e for e in new.get("extensions", [])}
    redefined = tuple(sorted(n for n in after if n in before and before[n] != after[n]))
    removed = tuple(sorted(set(before) - set(after)))
    stale = sorted({before[n][k] for n in (*redefined, *removed) for k in ("inplace", "build_lib")})
    return Changes(installed, redefined, removed, tuple(stale))


def generated_siblings(deleted: tuple[str, ...], tracked: set[str]) -> list[str]:
    """Untracked C files Cython generated from a removed ``.pyx``: a fresh tree has none."""
    out = []
    for path in deleted:
        if path.endswith(".pyx"):
            out += [c for c in (path[:-4] + ".c", path[:-4] + ".cpp") if c not in tracked]
    return out


def rebuild(images: LayerBuilder, delta: Delta, spec: EnvSpec, tree_dir: Path, tag: str, labels: dict,
            ccache_key: str, ccache_env: dict, ccache_mount: str) -> tuple[str, dict]:
    """Build ``tag`` as ``delta.base`` rebuilt for ``tree_dir``. Returns (log, the new
    declaration). Raises NotIncremental when the full install must run instead."""
    client, uid = images.client, images.bases.uid
    started = time.monotonic()
    log: list[str] = []
    host_cache = images.cache_dir / "ccache" / (ccache_key or "default")
    host_cache.mkdir(parents=True, exist_ok=True)
    env = {**ccache_env, "HOME": f"{WORK}/home",
           "PATH": f"/usr/lib/ccache:{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    base = client.images.get(delta.base.tag)
    # no owner label and no user on this container: a commit keeps the container's labels and
    # user in the image (each step runs as root by its own exec)
    container = client.containers.create(base.id, command=["sleep", "infinity"], network_mode="none",
                                         working_dir="/", mounts=[Mount(target=ccache_mount, source=str(host_cache),
                                                                        type="bind")])

    def run(script: str, what: str, timeout: int = 600, fatal: bool = True) -> str:
        code, output = container.exec_run(["/usr/bin/timeout", str(timeout), "/bin/bash", "-c", script],
                                          workdir="/", environment=env, user="0:0")
        text = output.decode(errors="replace")
        log.append(f"# {what} (exit {code}, {time.monotonic() - started:.1f} s)\n{text[-4000:]}")
        if code != 0 and fatal:
            raise NotIncremental(f"{what} failed (exit {code}): {text[-600:]}")
        return text

    def read_json(path: str) -> dict:
        code, output = container.exec_run(["cat", path], user="0:0")
        if code != 0:
            raise NotIncremental(f"{path} was not written (see the step's log)")
        return json.loads(output)

    try:
        container.start()
        tracked = {e.path for e in GitDir(tree_dir).ls_tree("HEAD")}
        removed = [*delta.deleted, *generated_siblings(delta.deleted, tracked)]
        changed = "\0".join(delta.changed).encode()
        run(f"set -e; mkdir -p {WORK}/home; touch -d @$(( $(date +%s) - 2 )) {STAMP}; "
            f"rm -rf /testbed; ln -s {PRISTINE_TREE} /testbed", "prepare")
        container.put_archive(WORK, tar_bytes({"declared.py": DECLARED.read_bytes(), "changed.list": changed,
                                            "removed.list": "\0".join(removed).encode()}))
        declare = (f"cd /testbed && python {WORK}/declared.py declare {{out}} > {WORK}/declare.log 2>&1 "
                   f"|| {{{{ tail -c 3000 {WORK}/declare.log; exit 1; }}}}")
        old = delta.base.declared
        if old is None:
            run(declare.format(out=f"{WORK}/old.json"), "declarations of the earlier tree", timeout=DECLARE_TIMEOUT)
            old = read_json(f"{WORK}/old.json")
        # the new tree: changed files (dated after the stamp), removed ones gone
        with tempfile.TemporaryDirectory(prefix="harness-inc-") as tmp:
            delta_tar = Path(tmp) / "delta.tar"
            write_delta(delta, tree_dir, delta_tar, uid)
            with open(delta_tar, "rb") as handle:
                container.put_archive("/", handle)
        run(f"set -e; cd {PRISTINE_TREE}; xargs -0 -r rm -rf -- < {WORK}/removed.list; {delete_listed()}; "
            f"xargs -0 -r touch -c -h -- < {WORK}/changed.list", "apply the tree's changes")
        run(declare.format(out=f"{WORK}/new.json"), "declarations of the new tree", timeout=DECLARE_TIMEOUT)
        new = read_json(f"{WORK}/new.json")
        changes = compare(old, new)
        if changes.stale_outputs:
            run(f"cd {PRISTINE_TREE} && rm -f -- " + " ".join(shlex.quote(p) for p in changes.stale_outputs),
                f"remove modules of changed or removed extensions ({', '.join(changes.redefined + changes.removed)})")
        if changes.installed:
            # what the install puts into the environment differs (metadata, packages): the
            # install itself runs again, incrementally, at a real /testbed (an editable
            # install records its resolved path), and what it wrote is copied back
            if spec.pre_install or spec.setup_files:
                raise NotIncremental(f"the tree declares other {', '.join(changes.installed)} and the spec has "
                                     "pre-install steps")
            command = spec.install
            run(f"set -e; rm /testbed; cp -a {PRISTINE_TREE} /testbed", "copy the tree to /testbed")
        else:
            command = spec.reinstall_command
        what = "install" if changes.installed else "rebuild"
        run(f"cd /testbed && bash -c {shlex.quote(command)}", f"{what}: {command}", timeout=REBUILD_TIMEOUT)
        run(f"cd /testbed && PYTHONDONTWRITEBYTECODE=1 python {WORK}/declared.py verify {WORK}/new.json "
            f"{WORK}/verify.json {STAMP} > {WORK}/verify.log 2>&1 || {{ tail -c 3000 {WORK}/verify.log; exit 1; }}",
            "verify", timeout=DECLARE_TIMEOUT)
        problems = read_json(f"{WORK}/verify.json")["problems"]
        if problems:
            raise NotIncremental("the rebuilt tree does not verify: " + "; ".join(problems[:5]))
        if changes.installed:
            run(f"set -o pipefail -e; cd /testbed; find . -path ./.git -prune -o ! -type d -newer {STAMP} -print0 "
                f"| tar -c --null --no-recursion -T - -f - | tar -x -p -C {PRISTINE_TREE} -f -; "
                f"rm -rf /testbed; ln -s {PRISTINE_TREE} /testbed", "copy what the install wrote back")
        run(f"set -e; cd {PRISTINE_TREE}; xargs -0 -r touch -c -h -d @{TREE_MTIME} -- < {WORK}/changed.list; "
            f"find {PRISTINE_TREE} -newer {STAMP} -exec chown -h {uid}:{uid} {{}} +; "
            f"rm -rf {WORK} {STAMP}; rm -rf /testbed; mkdir /testbed; chown {uid}:{uid} /testbed", "finish")
        container.kill()   # sleep, as process 1, ignores a stop's SIGTERM: that waited out its second
        # the image's configuration is the earlier instance's (not this container's command,
        # user or build environment), with this instance's labels
        commit_instance(container, base.attrs["Config"], tag, labels)
        log.append(f"# incremental {what}: {time.monotonic() - started:.1f} s; extensions redefined: "
                   f"{list(changes.redefined)}, removed: {list(changes.removed)}; declarations that differ: "
                   f"{list(changes.installed)}")
        images.keep_log(tag, "\n".join(log))
        return "\n".join(log), new
    except NotIncremental as exc:
        raise NotIncremental(f"{exc}\n" + "\n".join(log)[-6000:]) from None
    except docker.errors.APIError as exc:  # e.g. a commit refused: the full install still may work
        raise NotIncremental(f"the engine refused a step: {exc}\n" + "\n".join(log)[-6000:]) from None
    finally:
        container.remove(force=True, v=True)


def explain(error: ImageBuildError | NotIncremental) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__
