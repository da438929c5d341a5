"""A further instance of a built version, as a small layer on an earlier instance.

After a full instance build (the tree installed in a build container, see
:mod:`harness.engine.instance_layer`) a record is kept under
``<cache>/instance-builds/<inputs hash>.json``: the image's *family* (its inputs without
the tree: environment, compiler, install steps, environment variables), the export it
was built from, and the tracked files its install rewrote (a ``sed`` in ``pre_install``).

A later instance of the same family is built on such an image — only one built from
an *earlier or the same* commit, so that nothing an install derived from its tree (an
egg-info's file list, a long description) can tell an instance about its future — when the difference
between the two exports touches no *build input*: the spec's ``compiled_sources``
(C, Cython, headers, ...), the packaging files (setup.py, setup.cfg, pyproject.toml,
setup_package.py, requirement files, version files, templates) and no file the earlier
install rewrote. Then the install's outputs (build artefacts, extension modules,
editable-install metadata) are the same for both trees, and the new layer holds only
what differs: the changed, added and removed files of the working tree and of its
one-commit ``.git`` (whose objects are content-addressed loose files, so most are
shared; objects of the earlier commit are removed so no other commit's content remains).
When the difference does touch build inputs, but only compiled sources and packaging
declarations (:data:`DECLARATIONS`), and the spec keeps a compiler and names a rebuild
command, the earlier image is rebuilt incrementally instead
(:mod:`harness.engine.incremental`, which checks what the declarations say and falls back).
Otherwise the instance is built in full (with the compiler cache, so compilation is
still reused).
"""

from __future__ import annotations

import fnmatch
import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

from harness.engine.layers import PRISTINE_TREE, TREE_MTIME, LayerBuilder, commit_instance
from harness.errors import ImageBuildError
from harness.hashing import content_hash
from harness.inputs.repos import GitDir

#: Files whose change between two trees means the install must run again.
BUILD_INPUTS = ("setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in", "setup_package.py", "requirements*",
                "*.templ", "*.in", "_version.py", "version.py", "__pkginfo__.py", "meson.build", "CMakeLists.txt",
                "*.cmake", "Makefile")
DELETE_LIST = "/opt/harness/.delete-list"
#: Each further instance built on an earlier one adds layers; overlayfs stacks at most 128,
#: so an image this deep is no base (the instance is built in full, starting a new chain).
MAX_LAYERS = 100
#: Packaging files the incremental path may absorb: it compares what they declare (metadata,
#: packages, extension modules) before and after, in the build container, and falls back to
#: a full install when the metadata or packages differ.
DECLARATIONS = ("setup.py", "setup.cfg", "pyproject.toml", "setup_package.py", "MANIFEST.in")


@dataclass(frozen=True)
class BuildRecord:
    inputs_hash: str
    family: str
    tag: str
    export: str
    rewritten: tuple[str, ...]
    tree_time: int | None = None   # the source commit's time
    declared: dict | None = None   # what the tree declares (harness.engine.declared), when read

    @classmethod
    def load(cls, path: Path) -> "BuildRecord | None":
        try:
            data = json.loads(path.read_text())
            return cls(data["inputs_hash"], data["family"], data["tag"], data["export"], tuple(data["rewritten"]),
                       data.get("tree_time"), data.get("declared"))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{self.inputs_hash}.json.tmp"
        tmp.write_text(json.dumps({"inputs_hash": self.inputs_hash, "family": self.family, "tag": self.tag,
                                   "export": self.export, "rewritten": list(self.rewritten),
                                   "tree_time": self.tree_time, "declared": self.declared}))
        os.replace(tmp, directory / f"{self.inputs_hash}.json")


@dataclass(frozen=True)
class Delta:
    base: BuildRecord
    changed: tuple[str, ...]        # working-tree paths added or changed
    deleted: tuple[str, ...]        # working-tree paths removed
    git_changed: tuple[str, ...]    # .git files (relative to .git) added or changed
    git_deleted: tuple[str, ...]
    touched: tuple[str, ...] = ()   # build inputs among changed + deleted (empty: a small layer)


def family_key(inputs: dict) -> str:
    return content_hash({k: v for k, v in inputs.items() if k != "tree"})


def records_dir(images: LayerBuilder) -> Path:
    return images.cache_dir / "instance-builds"


def is_build_input(path: str, compiled_sources: tuple[str, ...], build_inputs: tuple[str, ...] = ()) -> bool:
    """``compiled_sources`` and :data:`BUILD_INPUTS` match file names, ``build_inputs``
    (a spec's further inputs, e.g. a module the build generates C from) whole paths."""
    name = path.rsplit("/", 1)[-1]
    return (any(fnmatch.fnmatchcase(name, p) for p in (*BUILD_INPUTS, *compiled_sources))
            or any(fnmatch.fnmatchcase(path, p) for p in build_inputs))


def is_rebuildable(path: str, compiled_sources: tuple[str, ...], build_inputs: tuple[str, ...] = ()) -> bool:
    """A build input the incremental rebuild can absorb: a compiled source, a declaration,
    or one of the spec's ``build_inputs`` (the rebuild regenerates what comes from it)."""
    name = path.rsplit("/", 1)[-1]
    return (any(fnmatch.fnmatchcase(name, p) for p in (*DECLARATIONS, *compiled_sources))
            or any(fnmatch.fnmatchcase(path, p) for p in build_inputs))


def plan(images: LayerBuilder, family: str, tree_dir: Path, compiled_sources: tuple[str, ...],
         tree_time: int | None = None, *, rebuildable: bool = False,
         build_inputs: tuple[str, ...] = ()) -> tuple[Delta | None, str]:
    """The best delta from an image of ``family`` built from an earlier commit (never
    a later one: the install's outputs, e.g. an egg-info's file list, must not tell the
    tree anything about its future) to ``tree_dir``, or (None, why not). With
    ``rebuildable``, a delta whose build inputs are all compiled sources or declarations
    qualifies too (``touched`` names them); one touching no build input is preferred,
    then the one touching fewest, then the smallest, then the latest."""
    if tree_time is None:
        return None, "the tree's commit time is unknown"
    candidates = []
    for path in sorted(records_dir(images).glob("*.json")):
        record = BuildRecord.load(path)
        if record is None or record.family != family or not Path(record.export, ".git").is_dir():
            continue
        if record.tree_time is None or record.tree_time > tree_time:
            continue
        image = images.find(record.tag)
        if image is None or len(image.attrs.get("RootFS", {}).get("Layers", ())) > MAX_LAYERS:
            continue  # gone, or a chain of further instances as deep as the engine allows
        candidates.append(record)
    if not candidates:
        return None, "no instance image of this version from an earlier commit"
    new = _listing(tree_dir)
    best: Delta | None = None
    why = "every earlier instance differs in a build input"
    for record in candidates:
        old = _listing(Path(record.export))
        changed = sorted(p for p, entry in new.items() if old.get(p) != entry)
        deleted = sorted(set(old) - set(new))
        touched = [p for p in (*changed, *deleted)
                   if is_build_input(p, compiled_sources, build_inputs) or p in record.rewritten]
        absorbable = rebuildable and all(is_rebuildable(p, compiled_sources, build_inputs)
                                         and p not in record.rewritten for p in touched)
        if touched and not absorbable:
            why = f"the tree differs from {record.tag} in build inputs ({', '.join(touched[:5])})"
            continue
        git_changed, git_deleted = _git_files_delta(Path(record.export, ".git"), Path(tree_dir, ".git"))
        delta = Delta(record, tuple(changed), tuple(deleted), tuple(git_changed), tuple(git_deleted), tuple(touched))
        if best is None or _rank(delta) < _rank(best):
            best = delta
    return best, ("" if best else why)


def _rank(delta: Delta) -> tuple[int, int, int]:
    # among equals, the nearest earlier commit (the latest built state)
    return (len(delta.touched), _size(delta), -(delta.base.tree_time or 0))


def _size(delta: Delta) -> int:
    return len(delta.changed) + len(delta.deleted) + len(delta.git_changed) + len(delta.git_deleted)


def _listing(export: Path) -> dict[str, tuple[str, str]]:
    return {e.path: (e.mode, e.oid) for e in GitDir(export).ls_tree("HEAD")}


def _git_files_delta(old: Path, new: Path) -> tuple[list[str], list[str]]:
    def files(root: Path) -> dict[str, int]:
        out = {}
        for dirpath, _, names in os.walk(root):
            for name in names:
                full = Path(dirpath, name)
                out[full.relative_to(root).as_posix()] = full.stat().st_size
        return out

    before, after = files(old), files(new)
    changed = []
    for rel, size in after.items():
        if rel not in before:
            changed.append(rel)
        elif not rel.startswith("objects/") and (size != before[rel] or
                                                 Path(old, rel).read_bytes() != Path(new, rel).read_bytes()):
            changed.append(rel)  # objects are content-addressed: same name, same content
    return sorted(changed), sorted(set(before) - set(after))


def write_delta(delta: Delta, tree_dir: Path, out: Path, uid: int) -> None:
    """A tar to ADD at / holding the changed files (tree mtime, the harness user's) and
    the list of paths to remove."""
    root = PRISTINE_TREE.lstrip("/")
    dirs: set[str] = set()
    for rel in (*delta.changed, *(f".git/{g}" for g in delta.git_changed)):
        parts = rel.split("/")[:-1]
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = uid
        info.uname = info.gname = ""
        info.mtime = TREE_MTIME
        return info

    removed = [f"{PRISTINE_TREE}/{p}" for p in delta.deleted] + [f"{PRISTINE_TREE}/.git/{g}" for g in delta.git_deleted]
    with tarfile.open(out, "w") as tar:
        for directory in sorted(dirs):
            info = tarfile.TarInfo(f"{root}/{directory}")
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(owned(info))
        for rel in (*delta.changed, *(f".git/{g}" for g in delta.git_changed)):
            tar.add(str(Path(tree_dir, rel)), arcname=f"{root}/{rel}", recursive=False, filter=owned)
        data = "\0".join(removed).encode()
        info = tarfile.TarInfo(DELETE_LIST.lstrip("/"))
        info.size = len(data)
        import io
        tar.addfile(info, io.BytesIO(data))


def delete_listed() -> str:
    """Shell: remove the files of :data:`DELETE_LIST` and the directories left empty by
    them (a fresh export has no empty directories)."""
    return (f"if [ -s {DELETE_LIST} ]; then xargs -0 -r rm -rf -- < {DELETE_LIST}; "
            f"tr '\\0' '\\n' < {DELETE_LIST} | while read -r f; do d=$(dirname \"$f\"); "
            f"while [ \"$d\" != {PRISTINE_TREE} ] && rmdir \"$d\" 2>/dev/null; do d=$(dirname \"$d\"); done; done; "
            f"fi; rm -f {DELETE_LIST}")


def commit_small_layer(images: LayerBuilder, base_tag: str, delta: Path, tag: str, labels: dict[str, str]) -> str:
    """The small layer as one commit: a container of the earlier instance's image gets the
    delta (:func:`write_delta`: the tar keeps its owners and times), deletes what it lists,
    and is committed with that image's configuration and ``labels`` over its labels.
    Returns what the removal printed, for the build log.

    A Dockerfile build (``ADD``, ``RUN``, ``LABEL``) made the same files in two layers and
    three steps, and its first layer kept the delete list its second removed."""
    client = images.client
    base = client.images.get(base_tag)
    config = base.attrs["Config"]
    # no labels and no user of its own: a commit keeps them in the image (each step runs as root)
    container = client.containers.create(base.id, command=["sleep", "infinity"], network_mode="none",
                                         working_dir="/")
    try:
        container.start()
        with open(delta, "rb") as handle:
            container.put_archive("/", handle)
        code, output = container.exec_run(["/bin/sh", "-c", f"set -e; {delete_listed()}"], user="0:0", workdir="/")
        if code != 0:
            raise ImageBuildError(f"{tag}: removing the files its tree no longer has failed on {base_tag} (exit {code})",
                                  log=output.decode(errors="replace"))
        container.kill()   # sleep, as process 1, ignores a stop's SIGTERM
        commit_instance(container, config, tag, labels)
        return output.decode(errors="replace")
    finally:
        container.remove(force=True, v=True)
