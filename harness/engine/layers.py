"""What the image builder and its layer modules share: the layout constants, the typed
references to built images, the base definition, the tar helpers of build contexts, and
:class:`LayerBuilder`, the interface a layer module builds through.

:class:`~harness.engine.images.ImageBuilder` implements :class:`LayerBuilder` and calls the
layer modules (:mod:`~harness.engine.interpreter_layer`, :mod:`~harness.engine.instance_layer`);
they depend on this module only, so none of them imports the builder back.
"""

from __future__ import annotations

import io
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import docker
import yaml

from harness.errors import InputError
from harness.inputs.spec_fields import InterpreterSource, parse_interpreter_source
from harness.inputs.specs import IMAGES_DIR

#: Bumped when the layout of an image layer changes, so old images are not reused.
IMAGE_FORMAT = 7
VENV = "/opt/harness/venv"
PYTHON = f"{VENV}/bin/python"
PRISTINE_TREE = "/opt/harness/testbed"
LABEL_PREFIX = "org.harness"
DEBIAN_PYTHON = "/usr/bin/python3"


@dataclass(frozen=True)
class ImageRef:
    """A built (or found) image. ``build_seconds`` is 0.0 when it already existed;
    ``log_path`` is its whole build log when this process or an earlier one built it."""

    tag: str
    image_id: str
    kind: str
    inputs_hash: str
    built: bool = False
    build_seconds: float = 0.0
    labels: dict | None = None
    log_path: str | None = None
    #: ``HOST:PORT/name@sha256:...`` when this engine pulled it from a registry (--registry)
    pulled: str | None = None


@dataclass(frozen=True)
class Interpreter:
    """A resolved interpreter: the image it runs in, its exact version and source."""

    python: str           # the X.Y a spec asked for
    version: str          # exact, e.g. 3.8.18
    executable: str       # inside the image
    suite: str
    source: InterpreterSource
    image: ImageRef

    def describe(self) -> dict[str, str]:
        return {"python": self.python, "version": self.version, "executable": self.executable,
                "suite": self.suite, "source": self.source.describe(), "image_id": self.image.image_id}


@dataclass(frozen=True)
class BaseDefinition:
    pythons: dict[str, InterpreterSource]
    variant: str
    packages: tuple[str, ...]
    compiler_packages: tuple[str, ...]
    user: str
    uid: int
    glibc: dict[str, str]
    installer: dict[str, tuple[str, ...]]
    suite_packages: dict[str, tuple[str, ...]]
    service_user: str = "harness-svc"
    service_uid: int = 1001

    @classmethod
    def load(cls, path: Path = IMAGES_DIR / "bases.yaml") -> "BaseDefinition":
        data = yaml.safe_load(Path(path).read_text())
        pythons = {str(k): parse_interpreter_source(v, where=f"pythons.{k}") for k, v in data["pythons"].items()}
        return cls(pythons, data.get("variant", "minbase"), tuple(data["packages"]),
                   tuple(data.get("compiler_packages", ())), data["user"]["name"], int(data["user"]["uid"]),
                   {str(k): str(v) for k, v in (data.get("glibc") or {}).items()},
                   {str(k): tuple(v) for k, v in (data.get("installer") or {}).items()},
                   {str(k): tuple(v) for k, v in (data.get("suite_packages") or {}).items()},
                   data.get("service_user", {}).get("name", "harness-svc"),
                   int(data.get("service_user", {}).get("uid", 1001)))

    def source_for(self, python: str, override: dict[str, str] | None = None) -> InterpreterSource:
        if override:
            return parse_interpreter_source(dict(override))
        try:
            return self.pythons[python]
        except KeyError:
            raise InputError(f"no interpreter source provides Python {python} (available: "
                             f"{', '.join(sorted(self.pythons, key=_version_key))}; name one with the spec's "
                             "`interpreter` or in images/bases.yaml `pythons`)", field="python") from None

    def suite_for(self, python: str) -> str:
        return self.source_for(python).suite

    def installer_for(self, python: str) -> tuple[str, ...]:
        if python not in self.installer:
            raise InputError(f"images/bases.yaml has no installer pins for Python {python}; pin pip, setuptools "
                             "and wheel in the spec's `installer`", field="installer")
        return self.installer[python]


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


class LayerBuilder(Protocol):
    """The builder a layer module builds through (:class:`~harness.engine.images.ImageBuilder`)."""

    client: docker.DockerClient
    cache_dir: Path
    bases: BaseDefinition

    def find(self, tag: str) -> Any | None:
        """The engine's image ``tag`` (leased and recorded as used), or None."""

    def labels(self, kind: str, inputs_hash: str, inputs: dict) -> dict[str, str]:
        """The labels that name a layer's kind and inputs."""

    def cached(self, tag: str, kind: str, inputs_hash: str, build: Callable[[], None],
               parent_id: str | None = None) -> ImageRef:
        """``tag`` found, pulled or built once (under a lock) with ``build()``."""

    def log_path(self, tag: str) -> Path:
        """Where the build log of ``tag`` is kept."""

    def keep_log(self, tag: str, text: str) -> Path:
        """Keep ``text`` as the build log of ``tag``."""

    def docker_build(self, tag: str, dockerfile: str, files: dict[str, Path | bytes],
                     labels: dict[str, str]) -> Any:
        """Build ``tag`` from a generated context, with no network."""

    def suite_base(self, suite: str, extra_apt: tuple[str, ...] = ()) -> ImageRef:
        """The harness's base image of a Debian suite."""


#: A LABEL instruction longer than this is not written (the classic builder's Dockerfile
#: parser reads lines of at most 64 KiB); the labels then go through the build API.
MAX_LABEL_INSTRUCTION = 16384


def label_instruction(labels: dict[str, str]) -> str | None:
    """One ``LABEL`` instruction that sets all of ``labels``, or None when it cannot be
    written safely (a line break in a key or value, or a line too long to parse).

    The engine's build API adds one build step per label it is given, each a container
    created and committed (about 0.25 s here); an instance layer has seven labels. One
    instruction is one step. In a double-quoted Dockerfile word a backslash escapes
    ``"``, ``$`` and itself, so those three are escaped and nothing is substituted."""
    def quoted(text: str) -> str | None:
        if "\n" in text or "\r" in text:
            return None
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'
    words = []
    for key, value in sorted(labels.items()):
        key_word, value_word = quoted(key), quoted(value)
        if key_word is None or value_word is None:
            return None
        words.append(f"{key_word}={value_word}")
    line = "LABEL " + " ".join(words)
    return line if words and len(line) <= MAX_LABEL_INSTRUCTION else None


def tag_safe(text: str) -> str:
    return re.sub(r"[^a-z0-9_.-]", "-", text.lower())[:80]


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def tar_bytes(files: dict[str, bytes], mode: int = 0o644) -> bytes:
    """An uncompressed tar of ``files`` (name -> content), for ``put_archive``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            add_bytes(tar, name, data, mode)
    return buffer.getvalue()


#: mtime of every file of an exported tree (2000-01-01): fixed, and older than anything an
#: install writes, so the files an install creates or changes are found by mtime alone.
TREE_MTIME = 946684800


#: Where a build container sees what the host gives it (the exported tree, a wheelhouse),
#: bind-mounted read-only: a directory every base has, so that the mount point leaves nothing
#: in a committed layer.
BUILD_INPUT_MOUNT = "/mnt"


def tree_mount(tree_dir: Path) -> Any:
    """The read-only mount of an exported tree at :data:`BUILD_INPUT_MOUNT`."""
    from docker.types import Mount
    return Mount(target=BUILD_INPUT_MOUNT, source=str(Path(tree_dir).resolve()), type="bind", read_only=True)


def put_tree_shell() -> str:
    """Shell (root, in a build container with :func:`tree_mount`): the tree at PRISTINE_TREE as
    :func:`tree_tarinfo` puts it there (the harness user's, every mtime TREE_MTIME, modes
    kept), copied by tar inside the container instead of archived by the harness and sent
    through the engine; the directory itself stays root's, mode 755."""
    return (f"mkdir -p {PRISTINE_TREE} && tar -C {BUILD_INPUT_MOUNT} -c -f - --owner=1000 --group=1000 --numeric-owner "
            f"--mtime=@{TREE_MTIME} . | tar -C {PRISTINE_TREE} -x -p -f - && chown 0:0 {PRISTINE_TREE} && "
            f"chmod 755 {PRISTINE_TREE}")


def tree_tarinfo(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info = normalise_tarinfo(info)
    info.mtime = TREE_MTIME
    return info


def normalise_tarinfo(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Files in build contexts are owned by the harness user and keep their modes."""
    info.uid = info.gid = 1000
    info.uname = info.gname = ""
    return info


def commit_image(container: Any, base_config: dict, tag: str, labels: dict[str, str],
                 environment: list[str] | None = None, working_dir: str | None = None) -> None:
    """Commit a build container as the image ``tag``: the configuration of the image it was
    made from (``base_config``: command, entrypoint, user, working directory; ``environment``
    instead of its variables and ``working_dir`` instead of its directory when given),
    ``labels`` over its labels. The container must carry no user, labels or working directory
    of its own: a commit keeps them in the image."""
    repository, name = tag.split(":", 1)
    container.commit(repository, name, conf={
        "Cmd": base_config.get("Cmd"), "Entrypoint": base_config.get("Entrypoint"),
        "User": base_config.get("User") or "",
        "WorkingDir": (base_config.get("WorkingDir") or "") if working_dir is None else working_dir,
        "Env": base_config.get("Env") if environment is None else environment,
        "Labels": {**(base_config.get("Labels") or {}), **labels}})


def commit_instance(container: Any, base_config: dict, tag: str, labels: dict[str, str],
                    environment: list[str] | None = None) -> None:
    """:func:`commit_image` of an instance image: /testbed is its working directory."""
    commit_image(container, base_config, tag, labels, environment, "/testbed")


def with_variables(environment: list[str], variables: dict[str, str]) -> list[str]:
    """``environment`` (``NAME=value`` lines) with ``variables`` set, as Dockerfile ``ENV``
    lines set them: a name already there keeps its place, a new one is appended (pure)."""
    out = list(environment)
    for name, value in variables.items():
        line = f"{name}={value}"
        for index, existing in enumerate(out):
            if existing.split("=", 1)[0] == name:
                out[index] = line
                break
        else:
            out.append(line)
    return out
