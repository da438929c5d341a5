"""Interpreter layers: an interpreter of a prefix or registry source, copied into the
base of its Debian suite (``harness-py:<version>-<hash>``), checked there, recorded.

A Debian interpreter is the suite's base itself. For the others, the layer holds the
prefix at the path it was built for (parents made traversable for the unprivileged user,
its ``lib`` registered with ``ldconfig``); ``check.sh`` (:func:`interpreters.check_script`)
lists unresolved shared libraries, refuses the layer when a required module does not
import, and records ``/opt/harness/python.json``.

An interpreter from a registry image (``{image: "python:3.8-slim-bookworm"}``) is used
when the engine already has the image, and pulled otherwise (only when a registry is
reachable: an unreachable registry is an ImageBuildError naming the image and the
registry's answer). It is never run with network and never becomes a base
itself: its interpreter prefix (``/usr/local`` by default) is copied into the harness's
own base of the same Debian suite, which brings the user, git and the other base
packages. The image's id and repository digest are recorded in the layer's labels.
"""

from __future__ import annotations

import json
import shlex
import tarfile
import tempfile
from pathlib import Path

from docker.errors import APIError, DockerException, ImageNotFound

from harness.engine import interpreters as interp
from harness.engine.client import run_once
from harness.engine.layers import DEBIAN_PYTHON, IMAGE_FORMAT, LABEL_PREFIX, ImageRef, Interpreter, LayerBuilder
from harness.errors import ImageBuildError
from harness.hashing import content_hash
from harness.inputs.spec_fields import InterpreterSource


def interpreter(builder: LayerBuilder, python: str, override: tuple[tuple[str, str], ...] | dict | None = None,
                extra_apt: tuple[str, ...] = ()) -> Interpreter:
    """The image ``python`` runs in, from the spec's ``override`` or bases.yaml."""
    source = builder.bases.source_for(python, dict(override) if override else None)
    base = builder.suite_base(source.suite, extra_apt)
    if source.kind == "debian":
        version = (base.labels or {}).get(f"{LABEL_PREFIX}.python-version", "")
        if not version.startswith(python + ".") and version != python:
            raise ImageBuildError(f"Debian {source.suite}'s python3 is {version or 'absent'}, not Python {python}"
                                  f" (choose another interpreter source for {python})")
        return Interpreter(python, version, DEBIAN_PYTHON, source.suite, source, base)
    if source.kind == "image":
        return interpreter_from_image(builder, python, source, base)
    prefix = interp.inspect_host_prefix(interp.find_pyenv_prefix(source.value) if source.kind == "pyenv"
                                        else Path(source.value))
    if not (prefix.version.startswith(python + ".") or prefix.version == python):
        raise ImageBuildError(f"{source.describe()} is Python {prefix.version}, not {python}")
    inputs = {"format": IMAGE_FORMAT, "base": base.image_id, "source": source.as_dict(),
              "host_prefix": str(prefix.path), "version": prefix.version, "build_prefix": prefix.build_prefix,
              "fingerprint": prefix.fingerprint, "excludes": list(interp.PREFIX_EXCLUDES)}
    inputs_hash = content_hash(inputs)
    tag = f"harness-py:{prefix.version}-{inputs_hash}"
    ref = builder.cached(tag, "py", inputs_hash, lambda: _build_prefix_layer(
        builder, tag, base, prefix.path, prefix.build_prefix, prefix.executable, inputs, inputs_hash, source),
        parent_id=base.image_id)
    return Interpreter(python, prefix.version, prefix.executable, source.suite, source, ref)


def _build_prefix_layer(builder: LayerBuilder, tag: str, base: ImageRef, host_prefix: Path, build_prefix: str,
                        executable: str, inputs: dict, inputs_hash: str, source: InterpreterSource) -> None:
    arcname = build_prefix.lstrip("/")
    with tempfile.TemporaryDirectory(prefix="harness-prefix-") as tmp:
        archive = Path(tmp) / "python.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(str(host_prefix), arcname=arcname,
                    filter=lambda info: None if interp.prefix_excluded(info.name[len(arcname) + 1:])
                    else _root_owned(info))
        dockerfile = prefix_dockerfile(base.tag, build_prefix, "ADD python.tar /")
        labels = builder.labels("py", inputs_hash, inputs)
        labels.update({f"{LABEL_PREFIX}.python": executable, f"{LABEL_PREFIX}.python-version": inputs["version"],
                       f"{LABEL_PREFIX}.python-source": source.describe()})
        builder.docker_build(tag, dockerfile, {"python.tar": archive, **prefix_context(executable)}, labels)


def prefix_dockerfile(parent: str, build_prefix: str, copy_line: str) -> str:
    """Dockerfile of an interpreter layer; its context holds probe.py and check.sh
    (:func:`prefix_context`)."""
    parents = []
    path = Path(build_prefix)
    while str(path.parent) != "/":
        path = path.parent
        parents.append(str(path))
    # A prefix built for a path under a private directory (pyenv's /root/.pyenv)
    # must be reachable by the unprivileged user: traverse-only for the parents.
    chmods = "".join(f"chmod o+x {shlex.quote(p)}; " for p in reversed(parents))
    return f"""FROM {parent}
{copy_line}
COPY probe.py check.sh /tmp/harness-check/
RUN {chmods}echo {shlex.quote(build_prefix + "/lib")} > /etc/ld.so.conf.d/harness-python.conf && ldconfig && \\
    bash /tmp/harness-check/check.sh && rm -rf /tmp/harness-check
"""


def prefix_context(executable: str) -> dict[str, bytes]:
    return {"probe.py": interp.PROBE.encode(),
            "check.sh": interp.check_script(executable, "/tmp/harness-check/probe.py").encode()}


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode &= ~0o022
    return info


def ensure_image(client, reference: str):
    """The local image for ``reference``, pulled when absent."""
    try:
        return client.images.get(reference)
    except ImageNotFound:
        pass
    repository, tag = _split(reference)
    try:
        return client.images.pull(repository, tag=tag)
    except (APIError, DockerException) as exc:
        raise ImageBuildError(f"interpreter image {reference} is not in the engine and pulling it failed "
                              f"(no registry reachable?): {getattr(exc, 'explanation', None) or exc}") from None


def _split(reference: str) -> tuple[str, str]:
    name, _, digest = reference.partition("@")
    if digest:
        return name, digest
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        repo, _, tag = name.rpartition(":")
        return repo, tag
    return name, "latest"


def probe_image(client, image_id: str, prefix: str) -> dict:
    """Run the image's interpreter once (no network) to learn its exact version."""
    script = (f"for p in {prefix}/bin/python3 {prefix}/bin/python; do [ -x $p ] && exec $p -c \"$0\"; done; "
              "echo no interpreter >&2; exit 3")
    try:
        out = run_once(client, image_id, ["/bin/sh", "-c", script, interp.PROBE], user="0:0", entrypoint=[])
    except DockerException as exc:
        raise ImageBuildError(f"the interpreter in {image_id[:19]} under {prefix} does not run: {exc}") from None
    return json.loads(out.decode().strip().splitlines()[-1])


def interpreter_from_image(builder: LayerBuilder, python: str, source: InterpreterSource,
                           base: ImageRef) -> Interpreter:
    image = ensure_image(builder.client, source.value)
    info = probe_image(builder.client, image.id, source.prefix)
    version = str(info["version"])
    if not (version.startswith(python + ".") or version == python):
        raise ImageBuildError(f"{source.describe()} is Python {version}, not {python}")
    minor = ".".join(version.split(".")[:2])
    executable = f"{source.prefix}/bin/python{minor}"
    digests = list(image.attrs.get("RepoDigests") or [])
    inputs = {"format": IMAGE_FORMAT, "base": base.image_id, "source": source.as_dict(), "image_id": image.id,
              "version": version}
    inputs_hash = content_hash(inputs)
    tag = f"harness-py:{version}-{inputs_hash}"

    def build() -> None:
        dockerfile = prefix_dockerfile(base.tag, source.prefix,
                                       f"COPY --from={source.value} {source.prefix}/ {source.prefix}/")
        labels = builder.labels("py", inputs_hash, inputs)
        labels.update({f"{LABEL_PREFIX}.python": executable, f"{LABEL_PREFIX}.python-version": version,
                       f"{LABEL_PREFIX}.python-source": source.describe(),
                       f"{LABEL_PREFIX}.source-image-id": image.id,
                       f"{LABEL_PREFIX}.source-image-digests": " ".join(digests)})
        files: dict[str, Path | bytes] = dict(prefix_context(executable))
        builder.docker_build(tag, dockerfile, files, labels)

    ref = builder.cached(tag, "py", inputs_hash, build, parent_id=base.image_id)
    return Interpreter(python, version, executable, source.suite, source, ref)
