"""Image layers, built without any registry (a registry is only ever a *source* of an
interpreter): base → interpreter → environment → instance.

* **base** (one per Debian suite): ``mmdebstrap`` builds a root filesystem from the
  host's own apt sources; ``docker import`` makes it an image; the unprivileged
  ``harness`` user is created. Tag ``harness-base:<suite>-<hash>``. The same bootstrap
  downloads (without installing) the compiler's Debian packages into
  ``harness-debs:<suite>-<hash>``, so a compiler can later be added to any image of that
  suite offline.
* **interpreter** (prefix and registry sources only): the interpreter's prefix copied
  into the suite's base. Tag ``harness-py:<version>-<hash>``. A Debian interpreter is the
  base itself.
* **compiler** (``harness-cc:<hash>``): any image plus the compiler packages of its suite
  (``dpkg -i`` of the downloaded ``.deb`` files, offline). The sdist builder is the
  interpreter image with it. A spec's ``compiler: keep`` builds its environment on that
  same image (the compiler is installed once per interpreter); ``compiler: build`` gets it
  on top of the environment for the build only, so its test image never holds it.
* **environment** (one per interpreter + locked requirement set): a root-owned virtual
  environment at ``/opt/harness/venv`` installed ``--no-index --require-hashes`` from the
  host's wheelhouse, pip itself included (bootstrapped from the lock's pip wheel), and the
  harness's site hook (:func:`harness.incontainer.site_hook`) in the site-packages of the
  venv and of its base interpreter, so that every Python process of the environment can
  run the harness's bootstrap while the tests run. Tag ``harness-env:py<ver>-<hash>``.
  Committed from a build container: see :mod:`harness.engine.environment_layer`.
* **instance**: see :mod:`harness.engine.instance_layer`.

Every tag carries a content hash of its inputs, so changing an input rebuilds that layer
and nothing else. With a registry (``use_registry``), a missing layer is pulled and verified
instead of built, and a layer built here is pushed (harness.engine.registry); without one,
every engine builds its own (same tags, same results). Builds run with ``network_mode=none``. Every build's whole log is kept
under ``<cache>/build-logs/`` (:attr:`ImageRef.log_path`).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, ImageNotFound, NotFound

from harness import incontainer

from harness.bookkeeping import builds
from harness.errors import ImageBuildError
from harness.hashing import content_hash
from harness.locks import file_lock
from harness.engine.environment_layer import LAYOUT as ENV_LAYOUT
from harness.engine.environment_layer import build_environment
from harness.engine.layers import (DEBIAN_PYTHON, IMAGE_FORMAT, LABEL_PREFIX, PYTHON, BaseDefinition, ImageRef,
                                   Interpreter, add_bytes, label_instruction, normalise_tarinfo)
from harness.inputs.specs import EnvSpec


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
    """Builds and finds the image layers. Safe for concurrent use by several threads and
    processes: each layer is built under a lock named by its tag."""

    def __init__(self, client: docker.DockerClient, cache_dir: Path,
                 bases: BaseDefinition | None = None) -> None:
        self.client = client
        self.cache_dir = Path(cache_dir)
        self.bases = bases or BaseDefinition.load()
        self.lock_dir = self.cache_dir / "locks"
        self.log_dir = self.cache_dir / "build-logs"
        #: a harness.engine.registry.Registry: pull instead of build, push after a build
        self.registry = None
        from harness.bookkeeping.usage import ImageTracker
        #: leases every image this process looks up (prune leaves them alone while it lives)
        #: and records its use (pruning by age and budget goes least recently used first)
        self.tracker = ImageTracker(client)

    def use_registry(self, address: str) -> None:
        """Pull layers from the registry at ``address`` (HOST:PORT) instead of building
        them, and push every layer built here (see harness.engine.registry)."""
        from harness.engine.registry import Registry
        self.registry = Registry(self.client, address)

    # ------------------------------------------------------------------ helpers
    def find(self, tag: str) -> Any | None:
        self.tracker.lease(tag)  # before the look-up: a prune either saw the lease or removed it already
        try:
            image = self.client.images.get(tag)
        except ImageNotFound:
            return None
        self.tracker.used(tag, image.id)
        return image

    def _ref(self, image: Any, kind: str, inputs_hash: str, built: bool = False,
             seconds: float = 0.0) -> ImageRef:
        tag = next((t for t in image.tags if t.startswith(f"harness-{kind}:")), image.tags[0] if image.tags
                   else image.id)
        log = self.log_path(tag)
        return ImageRef(tag, image.id, kind, inputs_hash, built, seconds, dict(image.labels or {}),
                        str(log) if log.exists() else None)

    def log_path(self, tag: str) -> Path:
        return self.log_dir / (re.sub(r"[^A-Za-z0-9_.-]", "_", tag) + ".log")

    def keep_log(self, tag: str, text: str) -> Path:
        path = self.log_path(tag)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, errors="replace")
        return path

    def labels(self, kind: str, inputs_hash: str, inputs: dict) -> dict[str, str]:
        return {f"{LABEL_PREFIX}.kind": kind, f"{LABEL_PREFIX}.inputs-hash": inputs_hash,
                f"{LABEL_PREFIX}.inputs": json.dumps(inputs, sort_keys=True, default=str)[:60000]}

    def cached(self, tag: str, kind: str, inputs_hash: str, build, parent_id: str | None = None) -> ImageRef:
        """Find ``tag`` on this engine, else pull it from the registry (verified), else
        build it once (under a lock) with ``build()`` and push it to the registry."""
        image = self.find(tag)
        if image is not None:
            return self._ref(image, kind, inputs_hash)
        with file_lock(self.lock_dir, tag):
            image = self.find(tag)
            if image is not None:
                return self._ref(image, kind, inputs_hash)
            if self.registry is not None:
                fetched = self.registry.fetch(tag, inputs_hash, parent_id)
                if fetched is not None:
                    image, pulled = fetched
                    ref = self._ref(image, kind, inputs_hash)
                    return ImageRef(ref.tag, ref.image_id, kind, inputs_hash, False, 0.0, ref.labels, ref.log_path,
                                    pulled=pulled.reference)
            started = time.monotonic()
            with builds.timed(kind, tag):
                build()
            image = self.find(tag)
            if image is None:
                raise ImageBuildError(f"building {tag} produced no image")
            seconds = time.monotonic() - started
            if self.registry is not None:
                self.registry.publish(tag)
            return self._ref(image, kind, inputs_hash, True, seconds)

    def docker_build(self, tag: str, dockerfile: str, files: dict[str, Path | bytes],
                     labels: dict[str, str]) -> Any:
        """Build from a generated context with no network. The whole log is kept;
        raises ImageBuildError with it when the build fails. The labels are one instruction
        at the end of the Dockerfile (:func:`label_instruction`), checked on the image."""
        instruction = label_instruction(labels)
        if instruction is not None:
            dockerfile = f"{dockerfile.rstrip(chr(10))}\n{instruction}\n"
        with tempfile.TemporaryFile() as context:
            with tarfile.open(fileobj=context, mode="w") as tar:
                add_bytes(tar, "Dockerfile", dockerfile.encode())
                for name, src in files.items():
                    if isinstance(src, bytes):
                        add_bytes(tar, name, src)
                    else:
                        tar.add(str(src), arcname=name, filter=normalise_tarinfo)
            context.seek(0)
            try:
                log = stream_build(self.client, context, tag, {} if instruction is not None else labels)
            except ImageBuildError as exc:
                path = self.keep_log(tag, f"# Dockerfile\n{dockerfile}\n# log\n{exc.log}")
                exc.log_path = str(path)
                raise
        self.keep_log(tag, f"# Dockerfile\n{dockerfile}\n# log\n{log}")
        image = self.find(tag)
        if image is None:
            raise ImageBuildError(f"building {tag} produced no image", log=log)
        wrong = sorted(k for k, v in labels.items() if (image.labels or {}).get(k) != v)
        if wrong:  # a label that does not say what was built would name the wrong inputs
            self.client.images.remove(image.id, force=True)
            raise ImageBuildError(f"building {tag}: the image's labels {', '.join(wrong)} are not the ones given",
                                  log=log)
        return image

    # ------------------------------------------------------------------ base (per suite)
    def suite_base(self, suite: str, extra_apt: tuple[str, ...] = ()) -> ImageRef:
        """The bootstrapped base of a Debian suite (and its compiler packages' image)."""
        packages = sorted({*self.bases.packages, *self.bases.suite_packages.get(suite, ()), *extra_apt})
        inputs = {"format": IMAGE_FORMAT, "suite": suite, "variant": self.bases.variant,
                  "packages": packages, "compiler_packages": sorted(self.bases.compiler_packages),
                  "user": [self.bases.user, self.bases.uid],
                  "service_user": [self.bases.service_user, self.bases.service_uid]}
        inputs_hash = content_hash(inputs)
        tag = f"harness-base:{suite}-{inputs_hash}"
        ref = self.cached(tag, "base", inputs_hash,
                           lambda: self._bootstrap(tag, suite, packages, inputs, inputs_hash))
        if self.registry is not None:  # the compiler packages travel with their base
            debs = self._debs_tag_for(tag)
            if ref.built:
                self.registry.publish(debs)
            elif self.find(debs) is None:
                self.registry.fetch(debs, inputs_hash)
        return ref

    def base(self, python: str, extra_apt: tuple[str, ...] = ()) -> ImageRef:
        """The image a Python runs in (kept for callers that only name a version)."""
        return self.interpreter(python, extra_apt=extra_apt).image

    def _bootstrap(self, tag: str, suite: str, packages: list[str], inputs: dict, inputs_hash: str) -> None:
        if shutil.which("mmdebstrap") is None:
            raise ImageBuildError("mmdebstrap is not installed: `apt-get install mmdebstrap` "
                                  "(or run `bash scripts/setup.sh`)")
        mirror = host_debian_mirror()
        user, uid = self.bases.user, self.bases.uid
        with tempfile.TemporaryDirectory(prefix="harness-rootfs-") as tmp:
            rootfs = Path(tmp) / "rootfs.tar"
            pkglist = Path(tmp) / "packages.txt"
            debs = Path(tmp) / "debs"
            debs.mkdir()
            compiler = " ".join(shlex.quote(p) for p in self.bases.compiler_packages)
            version_file = Path(tmp) / "python-version.txt"
            hooks = [
                f'chroot "$1" useradd --create-home --uid {uid} --shell /bin/bash {user}',
                f'chroot "$1" useradd --no-create-home --uid {self.bases.service_uid} --shell /usr/sbin/nologin '
                f'{self.bases.service_user}',
                'mkdir -p "$1/opt/harness" "$1/testbed"',
                f'chown {uid}:{uid} "$1/testbed"',
                "chroot \"$1\" dpkg-query -W -f='${Package}=${Version}\\n' > "
                '"$1/opt/harness/base-packages.txt"',
                f'cp "$1/opt/harness/base-packages.txt" {shlex.quote(str(pkglist))}',
                f'chroot "$1" python3 -c "import platform; print(platform.python_version())" > '
                f'{shlex.quote(str(version_file))} || true',
                # The compiler's packages, downloaded (not installed) against exactly this
                # root filesystem, so they can be installed later without network.
                'rm -f "$1"/var/cache/apt/archives/*.deb',
                (f'APT_CONFIG="$MMDEBSTRAP_APT_CONFIG" apt-get install --download-only --yes --quiet '
                 f'--no-install-recommends {compiler} && cp "$1"/var/cache/apt/archives/*.deb '
                 f'{shlex.quote(str(debs))}/') if compiler else "true",
                'rm -rf "$1/var/cache/apt/archives"/*.deb "$1/var/lib/apt/lists"/*',
            ]
            cmd = ["mmdebstrap", f"--variant={self.bases.variant}", f"--include={','.join(packages)}",
                   "--mode=root", "--format=tar", "--quiet"]
            for hook in hooks:
                cmd.append(f"--customize-hook={hook}")
            cmd += [suite, str(rootfs), mirror]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            self.keep_log(tag, f"# {' '.join(map(shlex.quote, cmd))}\n{proc.stdout}{proc.stderr}")
            if proc.returncode != 0:
                raise ImageBuildError(f"mmdebstrap {suite} failed (exit {proc.returncode})",
                                      log=(proc.stdout + proc.stderr)[-20000:])
            packages_hash = content_hash(pkglist.read_text(), length=64)
            labels = self.labels("base", inputs_hash, inputs)
            labels[f"{LABEL_PREFIX}.packages-sha256"] = packages_hash
            labels[f"{LABEL_PREFIX}.python-version"] = version_file.read_text().strip() if version_file.exists() else ""
            labels[f"{LABEL_PREFIX}.python"] = DEBIAN_PYTHON
            changes = [f"LABEL {k}={json.dumps(v)}" for k, v in labels.items()]
            changes += ['ENV LANG=C.UTF-8 LC_ALL=C.UTF-8 TZ=UTC', 'CMD ["sleep", "infinity"]']
            debs_tar = Path(tmp) / "debs.tar"
            with tarfile.open(debs_tar, "w") as tar:
                tar.add(str(debs), arcname="debs")
            try:
                repo, _, version = self._debs_tag_for(tag).partition(":")
                debs_labels = {**self.labels("base", inputs_hash, inputs), f"{LABEL_PREFIX}.kind": "debs"}
                self.client.api.import_image_from_file(str(debs_tar), repository=repo, tag=version,
                                                       changes=[f"LABEL {k}={json.dumps(v)}"
                                                                for k, v in debs_labels.items()])
                self.client.api.import_image_from_file(str(rootfs), repository=tag.split(":")[0],
                                                       tag=tag.split(":")[1], changes=changes)
            except APIError as exc:
                raise ImageBuildError(f"docker import of {suite} failed: {exc.explanation or exc}") from None

    @staticmethod
    def _debs_tag_for(base_tag: str) -> str:
        return f"harness-debs:{base_tag.split(':', 1)[1]}"

    # ------------------------------------------------------------------ interpreter
    def interpreter(self, python: str, override: tuple[tuple[str, str], ...] | dict | None = None,
                    extra_apt: tuple[str, ...] = ()) -> Interpreter:
        """The image ``python`` runs in, from the spec's ``override`` or bases.yaml
        (:mod:`harness.engine.interpreter_layer`)."""
        from harness.engine.interpreter_layer import interpreter
        return interpreter(self, python, override, extra_apt)

    # ------------------------------------------------------------------ compiler layer
    def with_compiler(self, parent: ImageRef, suite_base: ImageRef) -> ImageRef:
        """``parent`` plus the compiler packages of its suite, installed offline."""
        debs = self._debs_tag_for(suite_base.tag)
        if self.find(debs) is None:
            raise ImageBuildError(f"{debs} (the compiler packages of {suite_base.tag}) is missing: remove "
                                  f"{suite_base.tag} so that it is bootstrapped again")
        inputs = {"format": IMAGE_FORMAT, "parent": parent.image_id, "debs": self.find(debs).id}
        inputs_hash = content_hash(inputs)
        tag = f"harness-cc:{inputs_hash}"
        dockerfile = f"""FROM {parent.tag}
COPY --from={debs} /debs/ /tmp/harness-debs/
RUN dpkg -i /tmp/harness-debs/*.deb > /tmp/dpkg.log 2>&1 || {{ cat /tmp/dpkg.log; exit 1; }}; \\
    rm -rf /tmp/harness-debs /tmp/dpkg.log; mkdir -p /opt/harness/ccache
"""
        labels = self.labels("cc", inputs_hash, inputs)
        labels[f"{LABEL_PREFIX}.compiler"] = "yes"
        return self.cached(tag, "cc", inputs_hash, lambda: self.docker_build(tag, dockerfile, {}, labels),
                            parent_id=parent.image_id)

    def builder(self, interpreter: Interpreter) -> ImageRef:
        """The network-less builder of sdists and tree metadata: the interpreter with a compiler."""
        return self.with_compiler(interpreter.image, self.suite_base(interpreter.suite))

    # ------------------------------------------------------------------ environment
    def environment(self, spec: EnvSpec, interpreter: Interpreter, lock_text: str, wheel_dir: Path,
                    services: list[tuple[Any, str, Path]] | None = None, parent: ImageRef | None = None) -> ImageRef:
        """The environment layer: a root-owned venv installed offline from ``wheel_dir``,
        plus one venv per local service (``services``: (ServiceSpec, lock text, wheel dir)),
        on ``parent`` (default: the interpreter's image; a spec that keeps its compiler puts it
        on the interpreter with the compiler, the sdist builder's image, so the compiler layer is
        made once per interpreter and not again on every environment).

        ``lock_text`` is a pip requirements file with ``--hash`` for every line (pip,
        setuptools and wheel included); it decides the tag together with the
        interpreter image and the services' locks and build steps.
        """
        services = services or []
        parent = parent or interpreter.image
        inputs = {"format": IMAGE_FORMAT, "layout": ENV_LAYOUT, "base": parent.image_id, "lock": content_hash(lock_text, 64),
                  "python": interpreter.version, "venv": "copies", "site_hook": incontainer.site_hook_digest(),
                  "services": [[svc.name, content_hash(lock, 64), list(svc.build)] for svc, lock, _ in services]}
        inputs_hash = content_hash(inputs)
        tag = f"harness-env:py{spec.python}-{inputs_hash}"
        exe = interpreter.executable

        def build() -> None:
            labels = self.labels("env", inputs_hash, inputs)
            labels[f"{LABEL_PREFIX}.python"] = PYTHON
            labels[f"{LABEL_PREFIX}.python-version"] = interpreter.version
            labels[f"{LABEL_PREFIX}.python-source"] = interpreter.source.describe()
            build_environment(self, tag, parent.image_id, exe, lock_text, wheel_dir, services, labels)

        return self.cached(tag, "env", inputs_hash, build, parent_id=parent.image_id)

    def instance(self, *args, **kwargs) -> ImageRef:
        from harness.engine.instance_layer import build_instance
        return build_instance(self, *args, **kwargs)

    def remove_quietly(self, ref: str) -> None:
        try:
            self.client.images.remove(ref, noprune=False)
        except (NotFound, APIError):
            pass


def stream_build(client: docker.DockerClient, context, tag: str, labels: dict[str, str],
                 buildargs: dict[str, str] | None = None) -> str:
    """Build ``tag`` from a tar build context (a file object) with no network and no pull.
    Returns the whole build log; raises ImageBuildError with it when the build fails."""
    log: list[str] = []
    try:
        for chunk in client.api.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True,
                                      network_mode="none", labels=labels, decode=True, pull=False,
                                      buildargs=buildargs):
            if "stream" in chunk:
                log.append(chunk["stream"])
            if "error" in chunk:
                raise ImageBuildError(f"building {tag} failed: {chunk['error'].strip()}", log="".join(log))
    except APIError as exc:
        raise ImageBuildError(f"building {tag} failed: {exc.explanation or exc}", log="".join(log)) from None
    return "".join(log)
