"""Image layers: base → environment → instance, built here or pulled from a registry.

* **base** (one per Debian suite, i.e. per Python version): ``mmdebstrap`` builds a root
  filesystem from the host's own apt sources; ``docker import`` makes it an image; the
  unprivileged ``harness`` user is created. Tag ``harness-base:<suite>-<hash>``.
* **environment** (one per distinct Python + locked requirement set): a root-owned
  virtual environment at ``/opt/harness/venv`` installed ``--no-index`` from the host's
  wheelhouse with ``--require-hashes``. Tag ``harness-env:py<ver>-<hash>``.
* **instance**: the one-commit repository at ``/opt/harness/testbed`` (installed as if it
  were at ``/testbed``, where containers see their working copy). Tag
  ``harness-inst:<instance_id>-<hash>``.

Every tag carries a content hash of its inputs (parent image id, package lists, lock,
tree hash, install commands), so changing an input rebuilds that layer and nothing else.
With a registry (``use_registry``), a missing layer is pulled and verified instead of
built, and a layer built here is pushed (harness.engine.registry); without one, every
engine builds its own (same tags, same results).
Builds run with ``network_mode=none``: no container, build or run, ever has network.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import yaml
from docker.errors import APIError, ImageNotFound

from harness.errors import ImageBuildError, InputError
from harness.hashing import content_hash
from harness.locks import file_lock
from harness.specs import IMAGES_DIR, EnvSpec

#: Bumped when the layout of an image layer changes, so old images are not reused.
IMAGE_FORMAT = 6
VENV = "/opt/harness/venv"
PYTHON = f"{VENV}/bin/python"
PRISTINE_TREE = "/opt/harness/testbed"
LABEL_PREFIX = "org.harness"


@dataclass(frozen=True)
class ImageRef:
    """A built (or found) image. ``build_seconds`` is 0.0 when it already existed."""

    tag: str
    image_id: str
    kind: str
    inputs_hash: str
    built: bool = False
    build_seconds: float = 0.0
    labels: dict | None = None
    #: ``HOST:PORT/name@sha256:...`` when this engine pulled it from a registry (--registry)
    pulled: str | None = None


@dataclass(frozen=True)
class BaseDefinition:
    python_suites: dict[str, str]
    variant: str
    packages: tuple[str, ...]
    builder_packages: tuple[str, ...]
    user: str
    uid: int
    glibc: dict[str, str]
    service_user: str = "harness-svc"
    service_uid: int = 1001

    @classmethod
    def load(cls, path: Path = IMAGES_DIR / "bases.yaml") -> "BaseDefinition":
        data = yaml.safe_load(path.read_text())
        return cls({str(k): v for k, v in data["python_suites"].items()}, data.get("variant", "minbase"),
                   tuple(data["packages"]), tuple(data.get("builder_packages", ())),
                   data["user"]["name"], int(data["user"]["uid"]),
                   {str(k): str(v) for k, v in (data.get("glibc") or {}).items()},
                   data.get("service_user", {}).get("name", "harness-svc"),
                   int(data.get("service_user", {}).get("uid", 1001)))

    def suite_for(self, python: str) -> str:
        try:
            return self.python_suites[python]
        except KeyError:
            raise InputError(f"no base image provides Python {python} (available: "
                             f"{', '.join(sorted(self.python_suites))})", field="python") from None


def host_debian_mirror() -> str:
    """The first Debian archive URI in the host's apt sources (not a security mirror).

    Read at run time so no archive host is written into the project.
    """
    candidates: list[str] = []
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for block in path.read_text(errors="replace").split("\n\n"):
            fields = dict(re.findall(r"^(\w[\w-]*):\s*(.+)$", block, re.M))
            if fields.get("Types", "").split()[:1] == ["deb"] and "Enabled: no" not in block:
                candidates += fields.get("URIs", "").split()
    legacy = Path("/etc/apt/sources.list")
    if legacy.exists():
        for line in legacy.read_text(errors="replace").splitlines():
            parts = line.split()
            if parts[:1] == ["deb"]:
                uri = next((p for p in parts[1:] if "://" in p), None)
                if uri:
                    candidates.append(uri)
    for uri in candidates:
        if "security" not in uri and uri.rstrip("/").endswith("/debian"):
            return uri
    if candidates:
        return candidates[0]
    raise ImageBuildError("no Debian archive found in the host's apt sources "
                          "(/etc/apt/sources.list.d/*.sources or /etc/apt/sources.list)")


class ImageBuilder:
    """Builds and finds the three image layers. Safe for concurrent use by several
    threads and processes: each layer is built under a lock named by its tag."""

    def __init__(self, client: docker.DockerClient, cache_dir: Path,
                 bases: BaseDefinition | None = None) -> None:
        self.client = client
        self.cache_dir = Path(cache_dir)
        self.bases = bases or BaseDefinition.load()
        self.lock_dir = self.cache_dir / "locks"
        #: a harness.engine.registry.Registry: pull instead of build, push after a build
        self.registry = None

    def use_registry(self, address: str) -> None:
        """Pull layers from the registry at ``address`` (HOST:PORT) instead of building
        them, and push every layer built here (see harness.engine.registry)."""
        from harness.engine.registry import Registry
        self.registry = Registry(self.client, address)

    # ------------------------------------------------------------------ helpers
    def _find(self, tag: str) -> Any | None:
        try:
            return self.client.images.get(tag)
        except ImageNotFound:
            return None

    def _ref(self, image: Any, kind: str, inputs_hash: str, built: bool = False,
             seconds: float = 0.0) -> ImageRef:
        tag = next((t for t in image.tags if t.startswith(f"harness-{kind}:")), image.id)
        return ImageRef(tag, image.id, kind, inputs_hash, built, seconds, dict(image.labels or {}))

    def _cached(self, tag: str, kind: str, inputs_hash: str, build, parent_id: str | None = None) -> ImageRef:
        """Find ``tag`` on this engine, else pull it from the registry (verified), else
        build it once (under a lock) with ``build()`` and push it to the registry."""
        image = self._find(tag)
        if image is not None:
            return self._ref(image, kind, inputs_hash)
        with file_lock(self.lock_dir, tag):
            image = self._find(tag)
            if image is not None:
                return self._ref(image, kind, inputs_hash)
            if self.registry is not None:
                fetched = self.registry.fetch(tag, inputs_hash, parent_id)
                if fetched is not None:
                    image, pulled = fetched
                    ref = self._ref(image, kind, inputs_hash)
                    return ImageRef(ref.tag, ref.image_id, kind, inputs_hash, False, 0.0, ref.labels,
                                    pulled=pulled.reference)
            started = time.monotonic()
            build()
            image = self._find(tag)
            if image is None:
                raise ImageBuildError(f"building {tag} produced no image")
            seconds = time.monotonic() - started
            if self.registry is not None:
                self.registry.publish(tag)
            return self._ref(image, kind, inputs_hash, True, seconds)

    def _labels(self, kind: str, inputs_hash: str, inputs: dict) -> dict[str, str]:
        return {f"{LABEL_PREFIX}.kind": kind, f"{LABEL_PREFIX}.inputs-hash": inputs_hash,
                f"{LABEL_PREFIX}.inputs": json.dumps(inputs, sort_keys=True, default=str)[:60000]}

    def _docker_build(self, tag: str, dockerfile: str, files: dict[str, Path | bytes],
                      labels: dict[str, str]) -> Any:
        """Build from a generated context with no network. Raises ImageBuildError with the log."""
        with tempfile.TemporaryFile() as context:
            with tarfile.open(fileobj=context, mode="w") as tar:
                _add_bytes(tar, "Dockerfile", dockerfile.encode())
                for name, src in files.items():
                    if isinstance(src, bytes):
                        _add_bytes(tar, name, src)
                    else:
                        tar.add(str(src), arcname=name, filter=_normalise_tarinfo)
            context.seek(0)
            log = stream_build(self.client, context, tag, labels)
        image = self._find(tag)
        if image is None:
            raise ImageBuildError(f"building {tag} produced no image", log=log)
        return image

    # ------------------------------------------------------------------ base
    def base(self, python: str, extra_apt: tuple[str, ...] = (), *, builder: bool = False) -> ImageRef:
        """The base image for a Python version (bootstrapped with mmdebstrap if absent)."""
        suite = self.bases.suite_for(python)
        packages = sorted({*self.bases.packages, *extra_apt, *(self.bases.builder_packages if builder else ())})
        inputs = {"format": IMAGE_FORMAT, "suite": suite, "variant": self.bases.variant,
                  "packages": packages, "user": [self.bases.user, self.bases.uid],
                  "service_user": [self.bases.service_user, self.bases.service_uid]}
        inputs_hash = content_hash(inputs)
        name = "builder" if builder else "base"
        tag = f"harness-{name}:{suite}-{inputs_hash}"
        return self._cached(tag, name, inputs_hash,
                            lambda: self._bootstrap(tag, suite, packages, inputs, inputs_hash, name))

    def _bootstrap(self, tag: str, suite: str, packages: list[str], inputs: dict, inputs_hash: str,
                   kind: str) -> None:
        if shutil.which("mmdebstrap") is None:
            raise ImageBuildError("mmdebstrap is not installed: `apt-get install mmdebstrap` "
                                  "(or run `bash scripts/setup.sh`)")
        mirror = host_debian_mirror()
        user, uid = self.bases.user, self.bases.uid
        with tempfile.TemporaryDirectory(prefix="harness-rootfs-") as tmp:
            rootfs = Path(tmp) / "rootfs.tar"
            pkglist = Path(tmp) / "packages.txt"
            hooks = [
                f'chroot "$1" useradd --create-home --uid {uid} --shell /bin/bash {user}',
                f'chroot "$1" useradd --no-create-home --uid {self.bases.service_uid} --shell /usr/sbin/nologin '
                f'{self.bases.service_user}',
                'mkdir -p "$1/opt/harness" "$1/testbed"',
                f'chown {uid}:{uid} "$1/testbed"',
                "chroot \"$1\" dpkg-query -W -f='${Package}=${Version}\\n' > "
                f'"$1/opt/harness/base-packages.txt"',
                f'cp "$1/opt/harness/base-packages.txt" {shlex.quote(str(pkglist))}',
                # Package caches and lists are not needed at run time.
                'rm -rf "$1/var/cache/apt/archives"/*.deb "$1/var/lib/apt/lists"/*',
            ]
            cmd = ["mmdebstrap", f"--variant={self.bases.variant}", f"--include={','.join(packages)}",
                   "--mode=root", "--format=tar", "--quiet"]
            for hook in hooks:
                cmd.append(f"--customize-hook={hook}")
            cmd += [suite, str(rootfs), mirror]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise ImageBuildError(f"mmdebstrap {suite} failed (exit {proc.returncode})",
                                      log=(proc.stdout + proc.stderr)[-20000:])
            packages_hash = content_hash(pkglist.read_text(), length=64)
            labels = self._labels(kind, inputs_hash, inputs)
            labels[f"{LABEL_PREFIX}.packages-sha256"] = packages_hash
            changes = [f"LABEL {k}={json.dumps(v)}" for k, v in labels.items()]
            changes += ['ENV LANG=C.UTF-8 LC_ALL=C.UTF-8 TZ=UTC', 'CMD ["sleep", "infinity"]']
            try:
                self.client.api.import_image_from_file(str(rootfs), repository=tag.split(":")[0],
                                                       tag=tag.split(":")[1], changes=changes)
            except APIError as exc:
                raise ImageBuildError(f"docker import of {suite} failed: {exc.explanation or exc}") from None

    # ------------------------------------------------------------------ environment
    def environment(self, spec: EnvSpec, lock_text: str, wheel_dir: Path,
                    services: list[tuple[Any, str, Path]] | None = None) -> ImageRef:
        """The environment layer: a root-owned venv installed offline from ``wheel_dir``,
        plus one venv per local service (``services``: (ServiceSpec, lock text, wheel dir)).

        ``lock_text`` is a pip requirements file with ``--hash`` for every line; it decides
        the tag together with the base image id and the services' locks and build steps.
        """
        services = services or []
        base = self.base(spec.python, spec.apt_packages)
        inputs = {"format": IMAGE_FORMAT, "base": base.image_id, "lock": content_hash(lock_text, 64),
                  "python": spec.python,
                  "services": [[svc.name, content_hash(lock, 64), list(svc.build)] for svc, lock, _ in services]}
        inputs_hash = content_hash(inputs)
        tag = f"harness-env:py{spec.python}-{inputs_hash}"

        def build() -> None:
            dockerfile = f"""FROM {base.tag}
COPY wheels/ /opt/harness/wheels/
COPY requirements.lock /opt/harness/requirements.lock
RUN set -e; python3 -m venv {VENV}; \\
    {PYTHON} -m pip install --quiet --no-index --no-deps --disable-pip-version-check \\
        --find-links /opt/harness/wheels --require-hashes -r /opt/harness/requirements.lock; \\
    {PYTHON} -m pip freeze --all > /opt/harness/installed.txt; \\
    chmod -R go-w {VENV}
ENV PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PIP_NO_INDEX=1 PIP_FIND_LINKS=/opt/harness/wheels PIP_DISABLE_PIP_VERSION_CHECK=1
"""
            files: dict[str, Path | bytes] = {"wheels": wheel_dir, "requirements.lock": lock_text.encode()}
            for svc, lock, svc_wheels in services:
                home = f"/opt/harness/services/{svc.name}"
                files[f"services/{svc.name}/wheels"] = svc_wheels
                files[f"services/{svc.name}/requirements.lock"] = lock.encode()
                files[f"services/{svc.name}/build.sh"] = ("set -e\ncd " + home + "\n" + "\n".join(svc.build)
                                                          + "\n").encode()
                dockerfile += f"""COPY services/{svc.name}/ {home}/
RUN set -e; python3 -m venv {home}/venv; \\
    {home}/venv/bin/python -m pip install --quiet --no-index --no-deps --disable-pip-version-check \\
        --find-links {home}/wheels --require-hashes -r {home}/requirements.lock; \\
    PATH={home}/venv/bin:$PATH bash {home}/build.sh; chmod -R go-w {home}
"""
            labels = self._labels("env", inputs_hash, inputs)
            labels[f"{LABEL_PREFIX}.python"] = PYTHON
            self._docker_build(tag, dockerfile, files, labels)

        return self._cached(tag, "env", inputs_hash, build, parent_id=base.image_id)

    # ------------------------------------------------------------------ instance
    def instance(self, instance_id: str, spec: EnvSpec, env: ImageRef, tree_dir: Path,
                 tree_sha: str) -> ImageRef:
        """The instance layer: the exported one-commit repository, installed.

        The tree is added once (to ``/opt/harness/testbed``); the install runs in a
        throw-away copy at ``/testbed`` and only the files it created or changed are
        copied back, so the layer costs little more than the working tree.
        """
        steps = [*spec.pre_install, spec.install] if spec.install else [*spec.pre_install]
        # spec `setup_files` are written into the working copy before pre_install/install
        writes = [f"mkdir -p \"$(dirname {shlex.quote(path)})\" && printf %s {shlex.quote(content)} > {shlex.quote(path)}"
                  for path, content in spec.setup_files]
        script = "\n".join(["set -e", "cd /testbed", *writes, *steps]) + "\n"
        env_lines = "".join(f"ENV {k}={json.dumps(v)}\n" for k, v in spec.env)
        uid = self.bases.uid
        dockerfile = f"""FROM {env.tag}
{env_lines}ADD testbed.tar {PRISTINE_TREE}/
COPY install.sh /opt/harness/install.sh
RUN set -e; touch /opt/harness/.stamp; \\
    rm -rf /testbed; cp -a --no-preserve=ownership {PRISTINE_TREE} /testbed; \\
    bash /opt/harness/install.sh; \\
    cd /testbed; find . -path ./.git -prune -o ! -type d -newer /opt/harness/.stamp -print \\
      | while read -r f; do mkdir -p "{PRISTINE_TREE}/$(dirname "$f")"; cp -a "$f" "{PRISTINE_TREE}/$f"; \\
          chown -h {uid}:{uid} "{PRISTINE_TREE}/$f"; done; \\
    cd /; rm -rf /testbed; mkdir /testbed; chown {uid}:{uid} /testbed
WORKDIR /testbed
"""
        inputs = {"format": IMAGE_FORMAT, "env": env.image_id, "tree": tree_sha,
                  "pre_install": list(spec.pre_install), "install": spec.install,
                  "env_vars": dict(spec.env), "setup_files": dict(spec.setup_files),
                  "dockerfile": content_hash(dockerfile + script, 64)}
        inputs_hash = content_hash(inputs)
        tag = f"harness-inst:{_tag_safe(instance_id)}-{inputs_hash}"

        def build() -> None:
            labels = self._labels("inst", inputs_hash, inputs)
            labels[f"{LABEL_PREFIX}.instance-id"] = instance_id
            labels[f"{LABEL_PREFIX}.tree-sha"] = tree_sha
            with tempfile.TemporaryDirectory(prefix="harness-ctx-") as tmp:
                tree_tar = Path(tmp) / "testbed.tar"
                with tarfile.open(tree_tar, "w") as tar:
                    tar.add(str(tree_dir), arcname=".", filter=_tree_tarinfo)
                files = {"testbed.tar": tree_tar, "install.sh": script.encode()}
                self._docker_build(tag, dockerfile, files, labels)

        return self._cached(tag, "inst", inputs_hash, build, parent_id=env.image_id)


def stream_build(client: docker.DockerClient, context, tag: str, labels: dict[str, str],
                 buildargs: dict[str, str] | None = None) -> str:
    """Build ``tag`` from a tar build context (a file object) with no network and no pull.
    Returns the build log's tail; raises ImageBuildError with it when the build fails."""
    log: list[str] = []
    try:
        for chunk in client.api.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True,
                                      network_mode="none", labels=labels, decode=True, pull=False,
                                      buildargs=buildargs):
            if "stream" in chunk:
                log.append(chunk["stream"])
            if "error" in chunk:
                raise ImageBuildError(f"building {tag} failed: {chunk['error'].strip()}", log="".join(log)[-20000:])
    except APIError as exc:
        raise ImageBuildError(f"building {tag} failed: {exc.explanation or exc}", log="".join(log)[-20000:]) from None
    return "".join(log)[-20000:]


def _tag_safe(text: str) -> str:
    return re.sub(r"[^a-z0-9_.-]", "-", text.lower())[:80]


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


#: mtime of every file of an exported tree (2000-01-01): fixed, and older than anything an
#: install writes, so the files an install creates or changes are found by mtime alone.
TREE_MTIME = 946684800


def _tree_tarinfo(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info = _normalise_tarinfo(info)
    info.mtime = TREE_MTIME
    return info


def _normalise_tarinfo(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Files in build contexts are owned by the harness user and keep their modes."""
    info.uid = info.gid = 1000
    info.uname = info.gname = ""
    return info
