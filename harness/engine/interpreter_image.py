"""An interpreter from a registry image (``{image: "python:3.8-slim-bookworm"}``).

The image is used when the engine already has it, and pulled otherwise (only when a
registry is reachable: an unreachable registry is an ImageBuildError naming the image
and the registry's answer). It is never run with network and never becomes a base
itself: its interpreter prefix (``/usr/local`` by default) is copied into the harness's
own base of the same Debian suite, which brings the user, git and the other base
packages. The image's id and repository digest are recorded in the layer's labels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from docker.errors import APIError, DockerException, ImageNotFound

from harness.engine import interpreters as interp
from harness.engine.client import run_once
from harness.errors import ImageBuildError
from harness.hashing import content_hash

if TYPE_CHECKING:  # pragma: no cover
    from harness.engine.images import ImageBuilder, ImageRef, Interpreter


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
    import json
    return json.loads(out.decode().strip().splitlines()[-1])


def interpreter_from_image(builder: "ImageBuilder", python: str, source: interp.InterpreterSource,
                           base: "ImageRef") -> "Interpreter":
    from harness.engine.images import IMAGE_FORMAT, LABEL_PREFIX, Interpreter
    from harness.engine.interpreter_layer import prefix_context, prefix_dockerfile
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
        labels = builder._labels("py", inputs_hash, inputs)
        labels.update({f"{LABEL_PREFIX}.python": executable, f"{LABEL_PREFIX}.python-version": version,
                       f"{LABEL_PREFIX}.python-source": source.describe(),
                       f"{LABEL_PREFIX}.source-image-id": image.id,
                       f"{LABEL_PREFIX}.source-image-digests": " ".join(digests)})
        builder.docker_build(tag, dockerfile, prefix_context(executable), labels)

    ref = builder._cached(tag, "py", inputs_hash, build, parent_id=base.image_id)
    return Interpreter(python, version, executable, source.suite, source, ref)
