"""The harness in a container: the ``harness-app`` image that ``docker-compose.yml`` runs.

A tool of the checkout, not of the package: it builds the image from the source tree
around it (pyproject.toml beside harness/), which an installed harness does not have.

:func:`build_harness_image` builds ``harness-app:<content-hash>`` (and points
``harness-app:latest`` at it) from ``images/harness/Dockerfile``, the way every harness
layer is built: no registry, no network. The image is

* FROM the project's own bookworm base (:meth:`ImageBuilder.base` for Python 3.11,
  bootstrapped with mmdebstrap on the host when absent; it has git);
* a virtual environment at ``/opt/harness-app`` with the harness's runtime dependencies
  (``[project].dependencies`` of ``pyproject.toml``) installed ``--no-index
  --require-hashes`` from a host-side :class:`~harness.preparation.wheelhouse.Wheelhouse`;
* the project installed from the wheel, as any user installs it: the wheel is built
  (offline, in a throw-away stage, with the hash-locked build backend) from a copy of the
  source tree (``pyproject.toml``, ``setup.py``, ``README.md``, ``LICENSE``, ``harness/``,
  ``images/``, ``instances/``; never ``.venv``, ``runs``, ``tests``) and carries the
  data (specs, bases, the demo set) inside the package, found by harness.resources.
  Nothing of the source tree stays in the image; ``harness --version`` names the commit
  the wheel was built from (``HARNESS_BUILD_COMMIT``, see setup.py).

The tag is a content hash of the base image id, both locks, every project file copied
(the Dockerfile is one of them) and the commit recorded, so a warm call finds the image
and builds nothing.

Some things only the host can do (the container has no mmdebstrap and usually no route
to the Debian archive or PyPI): :func:`prepare_offline` prepares every instance of a set
as ``harness run`` would (clones, exports, base images, wheelhouses, environment and
instance images), into the cache the container mounts and the engine it shares. Then the
containerised harness grades that set without network::

    .venv/bin/python scripts/selfimage.py    # build the image, prepare the demo set
    docker-compose run --rm harness run --predictions gold --run-id demo-gold --output-dir /runs
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import tarfile
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError

from harness.engine.images import ImageBuilder, stream_build
from harness.engine.layers import LABEL_PREFIX, ImageRef
from harness.errors import HarnessError, ImageBuildError, InputError
from harness.hashing import content_hash
from harness.locks import file_lock
from harness.preparation.wheelhouse import LockedWheelhouse, Wheelhouse

#: Bumped when the way the image is assembled changes outside the Dockerfile.
SELF_IMAGE_FORMAT = 1
REPOSITORY = "harness-app"
#: The cluster's image (docker-compose.yml's profile ``cluster``): the same, with the
#: ``ray`` extra installed (``harness node``, ``--executor ray``).
CLUSTER_REPOSITORY = "harness-cluster"
#: The registry's image: the project's bookworm base with Debian's docker-registry.
REGISTRY_REPOSITORY = "harness-registry"
PYTHON = "3.11"
#: What of the project goes into the image (relative to the project root).
PROJECT_FILES = ("pyproject.toml", "setup.py", "README.md", "LICENSE")
PROJECT_DIRS = ("harness", "images", "instances")
DOCKERFILE = Path("images") / "harness" / "Dockerfile"
#: Never copied: caches that running tools leave in the tree.
EXCLUDED_NAMES = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".git"})
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".swp")
#: Where the project is installed in the image (its data lies inside the package there).
VENV_DIR = "/opt/harness-app"


def default_project_root() -> Path:
    """The checkout this script lies in (scripts/ beside harness/)."""
    return Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ProjectFile:
    relpath: str
    path: Path
    mode: int  # 0o644 or 0o755
    sha256: str
    data: bytes  # what was hashed is what goes into the image, even if the file changes meanwhile


def project_files(root: Path) -> list[ProjectFile]:
    """The files copied into the image, sorted, with normalised modes and digests.

    Raises InputError when ``root`` is not a source tree of the harness.
    """
    root = Path(root)
    if not (root / "pyproject.toml").is_file() or not (root / "harness" / "__init__.py").is_file():
        raise InputError(f"{root} is not the harness source tree (pyproject.toml next to harness/): "
                         "build the harness image from a checkout of the project", field="project_root")
    found: list[ProjectFile] = []

    def add(path: Path) -> None:
        if path.is_symlink() or not path.is_file():
            return  # nothing in the tree is a symlink; never follow one out of it
        mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
        data = path.read_bytes()
        found.append(ProjectFile(path.relative_to(root).as_posix(), path, mode, hashlib.sha256(data).hexdigest(),
                                 data))

    for name in PROJECT_FILES:
        if (root / name).is_file():
            add(root / name)
    for name in PROJECT_DIRS:
        for dirpath, dirnames, filenames in os.walk(root / name):
            dirnames[:] = sorted(d for d in dirnames if not _excluded(d))
            for filename in sorted(filenames):
                if not _excluded(filename):
                    add(Path(dirpath) / filename)
    found.sort(key=lambda f: f.relpath)
    return found


def _excluded(name: str) -> bool:
    return name in EXCLUDED_NAMES or name.endswith(EXCLUDED_SUFFIXES)


def _requirements(root: Path, extras: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """(runtime dependencies with ``extras``, build-system requirements) from ``pyproject.toml``."""
    data = tomllib.loads((root / "pyproject.toml").read_text())
    runtime = [str(r) for r in data.get("project", {}).get("dependencies", [])]
    optional = data.get("project", {}).get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise InputError(f"pyproject.toml has no extra {extra!r}", field="extras")
        runtime += [str(r) for r in optional[extra] if str(r) not in runtime]
    build = [str(r) for r in data.get("build-system", {}).get("requires", ["setuptools", "wheel"])]
    return runtime, build


def _lock(images: ImageBuilder, cache_dir: Path, requirements: list[str], what: str) -> LockedWheelhouse:
    """A locked wheelhouse of ``requirements`` (plus the base's installer pins) for PYTHON."""
    from harness.engine.builder import Builder
    from harness.preparation.requirements import Req
    from harness.preparation.wheelhouse import Target
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    interpreter = images.interpreter(PYTHON)
    # the base's pip/setuptools/wheel defaults, except where the requirements name a tool
    # themselves (the build lock: pyproject's [build-system] requires setuptools>=77)
    named = {canonicalize_name(Requirement(r).name) for r in requirements}
    tools = [Req(p, f"images/bases.yaml installer for Python {PYTHON}") for p in images.bases.installer_for(PYTHON)
             if canonicalize_name(Requirement(p).name) not in named]
    reqs = [*tools, *(Req(r, f"harness pyproject.toml {what}") for r in requirements)]
    target = Target(interpreter.version, images.bases.glibc.get(interpreter.suite, "2.17"))
    return Wheelhouse(cache_dir).lock(target, reqs, tools, Builder(images, interpreter))


_FROM_CHECKOUT: Any = object()


def harness_image_inputs(client: docker.DockerClient, cache_dir: Path,
                         project_root: Path | None = None,
                         commit: str | None = _FROM_CHECKOUT,
                         extras: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    """(hashed inputs, build material) of the harness image. Bootstraps the base and fills
    the wheelhouses when absent (both need the host: mmdebstrap and PyPI). ``commit`` is
    recorded in the wheel; by default the HEAD of ``project_root`` when it is a checkout."""
    from harness.buildinfo import checkout_commit
    root = Path(project_root or default_project_root()).resolve()
    if commit is _FROM_CHECKOUT:
        commit = checkout_commit(root)
    files = project_files(root)
    if not (root / DOCKERFILE).is_file():
        raise InputError(f"{root / DOCKERFILE} is missing", field="project_root")
    images = ImageBuilder(client, Path(cache_dir))
    base = images.base(PYTHON)
    runtime, build = _requirements(root, extras)
    runtime_house = _lock(images, Path(cache_dir), runtime, "dependencies")
    build_house = _lock(images, Path(cache_dir), build, "[build-system] requires")
    inputs = {
        "format": SELF_IMAGE_FORMAT,
        "python": PYTHON,
        "base": base.image_id,
        "lock": content_hash(runtime_house.lock_text, 64),
        "build_lock": content_hash(build_house.lock_text, 64),
        "project": content_hash([[f.relpath, f.mode, f.sha256] for f in files], 64),
        "commit": commit,
    }
    if extras:
        inputs["extras"] = sorted(extras)
    material = {"root": root, "files": files, "base": base, "runtime": runtime_house, "build": build_house,
                "commit": commit}
    return inputs, material


def build_harness_image(client: docker.DockerClient, cache_dir: Path, *,
                        project_root: Path | None = None, commit: str | None = _FROM_CHECKOUT) -> str:
    """Build (or find) ``harness-app:<content-hash>``, tag it ``harness-app:latest`` and
    return the content-hash tag.

    ``cache_dir`` is the harness cache (wheelhouses, locks; the base image is built
    through it). ``project_root`` defaults to the source tree this module belongs to.
    Raises ImageBuildError (with the build log) when the build fails and InputError when
    there is no source tree (an installed, non-editable harness cannot rebuild itself).
    """
    return build_harness_image_ref(client, cache_dir, project_root=project_root, commit=commit).tag


def build_harness_image_ref(client: docker.DockerClient, cache_dir: Path, *,
                            project_root: Path | None = None, commit: str | None = _FROM_CHECKOUT,
                            extras: tuple[str, ...] = ()) -> ImageRef:
    """:func:`build_harness_image`, returning the full :class:`ImageRef` (built or found,
    timing). With ``extras`` (``("ray",)``): the cluster's image, ``harness-cluster``."""
    cache_dir = Path(cache_dir)
    inputs, material = harness_image_inputs(client, cache_dir, project_root, commit, extras)
    inputs_hash = content_hash(inputs)
    repository = CLUSTER_REPOSITORY if extras else REPOSITORY
    tag = f"{repository}:{inputs_hash}"
    images = ImageBuilder(client, cache_dir)
    image = images.find(tag)
    built, seconds = False, 0.0
    if image is None:
        with file_lock(cache_dir / "locks", tag):
            image = images.find(tag)
            if image is None:
                started = time.monotonic()
                labels = images.labels("app", inputs_hash, inputs)
                labels[f"{LABEL_PREFIX}.python"] = f"{VENV_DIR}/bin/python"
                image = _build(client, tag, material, labels)
                built, seconds = True, time.monotonic() - started
    latest = images.find(f"{repository}:latest")
    if latest is None or latest.id != image.id:
        client.api.tag(image.id, repository, "latest", force=True)
    return ImageRef(tag, image.id, "app", inputs_hash, built, seconds, dict(image.labels or {}))


def _build(client: docker.DockerClient, tag: str, material: dict[str, Any], labels: dict[str, str]) -> Any:
    """Send the generated context to the engine; build with no network."""
    runtime: LockedWheelhouse = material["runtime"]
    build: LockedWheelhouse = material["build"]
    base: ImageRef = material["base"]
    with tempfile.TemporaryFile() as context:
        with tarfile.open(fileobj=context, mode="w") as tar:
            dockerfile = next(f.data for f in material["files"] if f.relpath == DOCKERFILE.as_posix())
            _add_bytes(tar, "Dockerfile", dockerfile)
            _add_bytes(tar, "requirements.lock", runtime.lock_text.encode())
            _add_bytes(tar, "build-requirements.lock", build.lock_text.encode())
            for arcdir, house in (("wheels", runtime), ("build-wheels", build)):
                _add_dir(tar, arcdir)
                for wheel in sorted(house.wheel_dir.glob("*.whl")):
                    _add_file(tar, f"{arcdir}/{wheel.name}", wheel, 0o644)
            _add_dir(tar, "src")
            made: set[str] = set()
            for f in material["files"]:
                parts = f.relpath.split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    d = "/".join(parts[:i])
                    if d not in made:
                        made.add(d)
                        _add_dir(tar, f"src/{d}")
                _add_bytes(tar, f"src/{f.relpath}", f.data, f.mode)
        context.seek(0)
        log = stream_build(client, context, tag, labels, buildargs={"BASE_IMAGE": base.tag, "SELF_TAG": tag,
                                                                    "HARNESS_BUILD_COMMIT": material["commit"] or ""})
    _remove_build_stage(client, tag)
    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        raise ImageBuildError(f"building {tag} produced no image", log=log) from None


def _remove_build_stage(client: docker.DockerClient, tag: str) -> None:
    """Remove the untagged image of the Dockerfile's build stage (the project's wheel, the
    build backend). Its parent layers (the dependencies, installed per lock) stay in the
    engine's build cache, so that the next build after a code change reuses them."""
    for image in client.images.list(filters={"dangling": True, "label": f"{LABEL_PREFIX}.build-stage-of={tag}"}):
        try:
            client.images.remove(image.id, noprune=True)
        except APIError:
            pass  # in use or already gone: harmless, it is only disk space


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    tar.addfile(info)


def _add_file(tar: tarfile.TarFile, name: str, path: Path, mode: int) -> None:
    """Root-owned, fixed mode and time: the context depends on contents only."""
    info = tarfile.TarInfo(name)
    info.size = path.stat().st_size
    info.mode = mode
    with open(path, "rb") as handle:
        tar.addfile(info, handle)


def build_registry_image(client: docker.DockerClient, cache_dir: Path) -> ImageRef:
    """``harness-registry:latest``: the bookworm base bootstrapped with Debian's
    docker-registry (the cluster profile's registry; no registry image is pulled)."""
    ref = ImageBuilder(client, Path(cache_dir)).base(PYTHON, ("docker-registry",))
    client.api.tag(ref.image_id, REGISTRY_REPOSITORY, "latest", force=True)
    return ref


def publish_prepared(client: docker.DockerClient, registry: str, prepared_tags: list[str]) -> list[str]:
    """Push prepared layers (and the base each environment is built on) to ``registry``
    under their content-hash tags, so that cluster nodes pull instead of building."""
    from harness.engine.registry import Registry
    target = Registry(client, registry)
    tags: list[str] = []
    for tag in prepared_tags:
        image = client.images.get(tag)
        base_id = json.loads((image.labels or {}).get(f"{LABEL_PREFIX}.inputs", "{}")).get("base")
        if base_id:
            tags += [t for t in client.images.get(base_id).tags if t.startswith("harness-base:")][:1]
        tags.append(tag)
    pushed = []
    for tag in dict.fromkeys(tags):
        if target.publish(tag) is None:
            raise HarnessError(f"pushing {tag} to {registry} failed (see the log)")
        pushed.append(tag)
    return pushed


# ---------------------------------------------------------------------------- offline preparation

def prepare_offline(client: docker.DockerClient, cache_dir: Path, instances_file: Path,
                    *, allow_clone: bool = True) -> tuple[list[str], dict[str, str]]:
    """Make ``cache_dir`` (and the engine) hold what the containerised harness cannot fetch
    for an instance set, by preparing every instance exactly as ``harness run`` does on
    the host: clones (or the demo repositories), one-commit exports, base images
    (mmdebstrap), wheelhouses (PyPI), environment and instance images. Idempotent; quick
    when warm (every step is found by its content hash).

    Returns (one line per prepared instance, {instance id: error} for those that could not
    be prepared). Raises InputError when the instance file as a whole is unreadable; a
    malformed record is skipped as ``harness run`` skips it.
    """
    from harness.inputs.instances import load_instances
    from harness.inputs.repos import RepoResolver
    from harness.preparation.preparer import Preparer
    from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry

    cache_dir = Path(cache_dir)
    loaded = load_instances(Path(instances_file))
    preparer = Preparer(client, SpecRegistry.load(DEFAULT_SPECS_DIR),
                        RepoResolver(cache_dir, None, allow_clone=allow_clone), cache_dir)
    done: list[str] = []
    failed: dict[str, str] = {}
    for instance in loaded.instances:
        try:
            prepared = preparer.prepare(instance)
        except HarnessError as exc:
            failed[instance.instance_id] = f"{type(exc).__name__}: {exc}"
            continue
        done.append(f"{instance.instance_id}: environment {prepared.env_image.tag}, image {prepared.image.tag}")
    return done, failed


# ---------------------------------------------------------------------------- entry point

def main(argv: list[str] | None = None) -> int:
    """``scripts/selfimage.py``: build the image, prepare the cache, print the tag."""
    from harness.inputs.demo import DEMO_DIR
    from harness.engine.client import connect
    from harness.errors import EngineUnavailable
    from harness.paths import cache_root

    parser = argparse.ArgumentParser(prog="scripts/selfimage.py", description=(
        "Build the harness-app image docker-compose.yml runs, and prepare the cache for "
        "instance sets (base images, wheelhouses, environments, clones: what a container cannot fetch)."))
    parser.add_argument("--cache-dir", type=Path, help="default: $HARNESS_CACHE_DIR or ~/.cache/harness "
                        "(the directory docker-compose.yml mounts)")
    parser.add_argument("--prepare", type=Path, action="append", default=None, metavar="INSTANCES",
                        help="instance set to prepare the cache for (repeatable; default: the demo set)")
    parser.add_argument("--no-prepare", action="store_true", help="only build the image")
    parser.add_argument("--cluster", action="store_true",
                        help="also build harness-cluster:latest (with Ray) and harness-registry:latest, the "
                             "images of docker-compose.yml's cluster profile")
    parser.add_argument("--registry", metavar="HOST:PORT",
                        help="push the prepared base, environment and instance images to this registry")
    args = parser.parse_args(argv)
    cache_dir = args.cache_dir.expanduser().resolve() if args.cache_dir else cache_root()
    try:
        client = connect()
        started = time.monotonic()
        ref = build_harness_image_ref(client, cache_dir)
        verb = f"built in {ref.build_seconds:.1f} s" if ref.built else "up to date"
        print(f"harness image {ref.tag} ({verb}), tagged {REPOSITORY}:latest", file=sys.stderr)
        if args.cluster:
            cluster = build_harness_image_ref(client, cache_dir, extras=("ray",))
            registry = build_registry_image(client, cache_dir)
            print(f"cluster image {cluster.tag}, tagged {CLUSTER_REPOSITORY}:latest; registry image "
                  f"{registry.tag}, tagged {REGISTRY_REPOSITORY}:latest", file=sys.stderr)
        failures = 0
        if not args.no_prepare:
            for instances in args.prepare or [DEMO_DIR / "instances.jsonl"]:
                done, failed = prepare_offline(client, cache_dir, instances.expanduser().resolve())
                for line in done:
                    print(f"prepared {line}", file=sys.stderr)
                if args.registry:
                    prepared = [t for line in done for t in line.replace(",", " ").split()
                                if t.startswith(("harness-env:", "harness-inst:"))]
                    pushed = publish_prepared(client, args.registry, prepared)
                    print(f"pushed {len(pushed)} image(s) to {args.registry}", file=sys.stderr)
                for iid, error in failed.items():
                    print(f"selfimage: could not prepare {iid}: {error}", file=sys.stderr)
                failures += len(failed)
        print(f"ready in {time.monotonic() - started:.1f} s; cache {cache_dir}", file=sys.stderr)
    except (InputError, EngineUnavailable) as exc:
        print(f"selfimage: {exc}", file=sys.stderr)
        return 2
    except HarnessError as exc:
        print(f"selfimage: {type(exc).__name__}: {exc}", file=sys.stderr)
        log = getattr(exc, "log", "")
        if log:
            print(log[-4000:], file=sys.stderr)
        return 1
    print(ref.tag)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
