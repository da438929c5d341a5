"""SWE-bench's prebuilt evaluation images as an environment source (``--namespace NS``).

SWE-bench publishes one image per instance, ``NS/sweb.eval.x86_64.<instance id>:latest``
(``__`` in the name written ``_1776_``, all lower case: Docker Hub allows no dunder),
holding the repository at ``/testbed`` at the base commit *with its history*, and the
installed environment in a conda environment (``/opt/miniconda3/envs/testbed``). With
``--namespace`` the harness pulls that image instead of building an environment, and
grades in it exactly as in its own images. The image is the environment, not a
container to run as it is: a thin layer is derived from it (built here, network-less)
that

* checks what the harness's in-container steps need (``/usr/bin/python3`` >= 3.6, git,
  patch, setpriv, timeout, tar) and that ``/testbed``'s ``HEAD`` tree is the instance's
  base commit tree (read from the repository on the host, as for a build);
* puts the pristine tree at ``/opt/harness/testbed``: the image's working tree (what its
  install built included) with the one-commit ``.git`` of the host's export in place of
  the image's history, which is removed from ``/testbed`` (a tmpfs covers it at run time);
* creates the harness's users (uid 1000 test user, 1001 service user) when absent;
* points ``/opt/harness/venv`` (first on every command's ``PATH``) at the environment;
* adds the trusted bootstrap hook at its place in the environment (:func:`bootstrap_hook`).

The image's ``ENTRYPOINT``, ``CMD``, user and environment variables are dropped: every
command runs with the scrubbed environment and the users the harness names. What the image
is recorded as is its manifest digest, resolved before the pull and pulled by it
(``report.json`` ``image.provenance``). Without network, an image pulled before is used
with the digest the engine recorded for it.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound

from harness import incontainer
from harness.engine.client import CONNECTION_ERRORS
from harness.engine.images import ImageBuilder
from harness.engine.layers import IMAGE_FORMAT, LABEL_PREFIX, PRISTINE_TREE, VENV, ImageRef, tar_bytes
from harness.errors import ImageBuildError, InputError
from harness.hashing import content_hash

DEFAULT_ENV_PREFIX = "/opt/miniconda3/envs/testbed"
#: ``--namespace none``: SWE-bench's locally built images (``sweb.eval.x86_64.<id>:latest``), never pulled
LOCAL_NAMESPACE = "none"
TEST_UID, SERVICE_UID = 1000, 1001
_REFERENCE = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")
_PREFIX = re.compile(r"^/[A-Za-z0-9_.+/-]+$")


@dataclass(frozen=True)
class PrebuiltSource:
    """Where the prebuilt images come from: ``namespace`` is ``swebench`` (Docker Hub), a
    registry's ``HOST:PORT/NS``, or ``none`` (images built locally by SWE-bench)."""

    namespace: str
    env_prefix: str = DEFAULT_ENV_PREFIX
    arch: str = "x86_64"
    tag: str = "latest"

    def __post_init__(self) -> None:
        namespace = self.namespace.strip("/")
        if namespace != LOCAL_NAMESPACE and not _REFERENCE.fullmatch(namespace.lower()):
            raise InputError(f"expected a namespace (swebench), a registry and namespace (HOST:PORT/swebench) or "
                             f"'none', got {self.namespace!r}", field="--namespace")
        if not _PREFIX.fullmatch(self.env_prefix) or ".." in self.env_prefix.split("/"):
            raise InputError(f"expected an absolute directory, got {self.env_prefix!r}", field="--prebuilt-env")
        object.__setattr__(self, "namespace", namespace)

    def image_name(self, instance_id: str) -> str:
        """The instance's image as SWE-bench names it (swebench 5.0.2 ``ImageSpec.name``)."""
        key = f"sweb.eval.{self.arch}.{instance_id}:{self.tag}"
        if self.namespace == LOCAL_NAMESPACE:
            return key.lower()
        return f"{self.namespace}/{key}".replace("__", "_1776_").lower()


@dataclass(frozen=True)
class PulledImage:
    """The image as it is on this engine: ``digest`` its manifest digest (None for a
    locally built image, which has none: then ``image_id`` is all there is)."""

    name: str
    image_id: str
    digest: str | None
    reference: str

    def provenance(self) -> dict[str, Any]:
        return {"source": "prebuilt", "image": self.name, "digest": self.digest, "reference": self.reference,
                "image_id": self.image_id}


def pull(client: docker.DockerClient, name: str) -> PulledImage:
    """Resolve ``name`` to its manifest digest and pull it by that digest (the engine
    verifies every blob against it); with no registry answering, the local image the
    engine pulled before (by its recorded digest). ImageBuildError when neither exists."""
    repository = name.rsplit(":", 1)[0]
    try:
        digest = client.images.get_registry_data(name).id
    except (NotFound, APIError, DockerException, *CONNECTION_ERRORS) as exc:
        local = _local(client, name, repository)
        if local is not None:
            return local
        raise ImageBuildError(f"the prebuilt image {name} could not be resolved in its registry and is not on this "
                              f"engine: {str(exc)[:400]}") from None
    reference = f"{repository}@{digest}"
    try:
        client.api.pull(repository, tag=digest)
        image = client.images.get(reference)
    except (APIError, NotFound, DockerException, *CONNECTION_ERRORS) as exc:
        raise ImageBuildError(f"pulling {reference} failed: {str(exc)[:400]}") from None
    if reference not in (image.attrs.get("RepoDigests") or []):
        raise ImageBuildError(f"the engine does not record {reference} for the image it pulled")
    return PulledImage(name, image.id, digest, reference)


def _local(client: docker.DockerClient, name: str, repository: str) -> PulledImage | None:
    try:
        image = client.images.get(name)
    except (ImageNotFound, APIError, DockerException, *CONNECTION_ERRORS):
        return None
    digests = [d for d in image.attrs.get("RepoDigests") or [] if d.startswith(repository + "@")]
    if digests:
        return PulledImage(name, image.id, digests[0].split("@", 1)[1], digests[0])
    return PulledImage(name, image.id, None, image.id)


def local_image(client: docker.DockerClient, name: str) -> PulledImage:
    """An image SWE-bench built on this engine (``--namespace none``): no digest to pin."""
    found = _local(client, name, name.rsplit(":", 1)[0])
    if found is None:
        raise ImageBuildError(f"the image {name} is not on this engine (--namespace none uses images SWE-bench "
                              "built locally; give the namespace they are published under to pull them)")
    return found


# ---------------------------------------------------------------------------- what the environment is

_PROBE = r"""
import json, pkgutil, sys, sysconfig
paths = sysconfig.get_paths()
print(json.dumps({"version": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable,
                  "purelib": paths.get("purelib"), "platlib": paths.get("platlib"),
                  "modules": sorted({m[1] for m in pkgutil.iter_modules()
                                     if not str(getattr(m[0], "path", "")).startswith("/testbed")})}))
"""


def probe(client: docker.DockerClient, image: PulledImage, env_prefix: str) -> dict[str, Any]:
    """The environment's interpreter: version, site-packages, top-level modules (the names a
    repository must not shadow; the repository's own, installed from /testbed, are not among
    them). Runs the image's own interpreter once, network-less."""
    python = f"{env_prefix}/bin/python"
    try:
        output = client.containers.run(image.image_id, [python, "-I", "-c", _PROBE], entrypoint=[],
                                       network_mode="none", user="0:0", working_dir="/", remove=True,
                                       stdout=True, stderr=True, environment={"HOME": "/tmp"})
    except docker.errors.ContainerError as exc:
        raise ImageBuildError(f"the prebuilt image {image.name} has no working interpreter at {python} (give the "
                              f"environment's directory with --prebuilt-env): {str(exc)[-600:]}") from None
    except (APIError, DockerException, *CONNECTION_ERRORS) as exc:
        raise ImageBuildError(f"probing {image.name} failed: {str(exc)[:400]}") from None
    try:
        facts = json.loads(output.decode("utf-8", "replace").strip().splitlines()[-1])
        facts["modules"] = [str(m) for m in facts["modules"]]
        facts["python"] = ".".join(str(facts["version"]).split(".")[:2])
    except (ValueError, KeyError, IndexError, TypeError):
        raise ImageBuildError(f"probing {python} in {image.name} printed no facts: {output[-600:]!r}") from None
    return facts


def bootstrap_hook(env_prefix: str, facts: dict[str, Any]) -> dict[str, bytes]:
    """The trusted bootstrap the environment's interpreter loads, as files to add to the
    image (absolute path -> bytes): the harness's site hook in the site-packages directory
    the interpreter at ``env_prefix`` names (``facts``: :func:`probe`'s, ``purelib``), so
    that every Python process of the prebuilt environment runs the bootstrap while the
    launcher's activation file exists, as in the harness's own environment images."""
    purelib = facts.get("purelib")
    if not isinstance(purelib, str) or not purelib.startswith("/"):
        raise ImageBuildError(f"probing the interpreter under {env_prefix} named no site-packages directory "
                              f"(purelib {purelib!r}): the bootstrap has nowhere to go")
    path, data = incontainer.site_hook(purelib)
    return {path: data}


# ---------------------------------------------------------------------------- the thin layer

def thin_script(env_prefix: str, base_tree: str, user: str, service_user: str) -> str:
    """The thin layer's one RUN step (root, no network). A check that fails names itself."""
    q = shlex.quote
    return f"""set -euo pipefail
fail() {{ echo "harness: prebuilt image: $*" >&2; exit 1; }}
for tool in /usr/bin/python3 /usr/bin/env bash git patch setpriv timeout tar cp; do
  command -v "$tool" >/dev/null 2>&1 || fail "it lacks $tool, which the harness's in-container steps need"
done
/usr/bin/python3 -I -S -c 'import sys; sys.exit(sys.version_info < (3, 6))' \\
  || fail "/usr/bin/python3 is older than 3.6 (the harness's in-container steps need 3.6+)"
[ -x {q(env_prefix)}/bin/python ] || fail "no environment at {env_prefix} (bin/python): name it with --prebuilt-env"
[ -d /testbed/.git ] || fail "no git repository at /testbed"
got=$(git -c safe.directory='*' -C /testbed rev-parse 'HEAD^{{tree}}') || fail "git cannot read /testbed"
[ "$got" = {q(base_tree)} ] || fail "/testbed is at tree $got, not the base commit's tree {base_tree}"
[ -d /opt/harness/export/.git ] || fail "the export's .git did not arrive"
for path in {PRISTINE_TREE} {VENV}; do
  [ ! -e "$path" ] && [ ! -L "$path" ] || fail "it already has $path (an image derived by a harness is no source)"
done
getent passwd {TEST_UID} >/dev/null || useradd --create-home --uid {TEST_UID} --shell /bin/bash {q(user)} \\
  || fail "creating the test user (uid {TEST_UID}) failed"
getent passwd {SERVICE_UID} >/dev/null || useradd --no-create-home --uid {SERVICE_UID} --shell /usr/sbin/nologin \\
  {q(service_user)} || fail "creating the service user (uid {SERVICE_UID}) failed"
mkdir -p {PRISTINE_TREE}
tar -C /testbed --exclude=./.git -cf - . | tar -C {PRISTINE_TREE} -xpf -
mv /opt/harness/export/.git {PRISTINE_TREE}/.git
rmdir /opt/harness/export
chown -R {TEST_UID}:{TEST_UID} {PRISTINE_TREE}
rm -rf /testbed && mkdir /testbed && chown {TEST_UID}:{TEST_UID} /testbed
ln -s {q(env_prefix)} {VENV}
[ "$(git -c safe.directory='*' -C {PRISTINE_TREE} rev-list --count HEAD)" = 1 ] || fail "the pristine history is not one commit"
"""


def thin_layer(images: ImageBuilder, name_hint: str, pulled: PulledImage, facts: dict[str, Any], env_prefix: str,
               export_git: bytes, base_tree: str, export_head: str) -> ImageRef:
    """The image the sandboxes run: ``pulled`` plus the thin layer (see the module doc).
    Tagged ``harness-sweb:<name>-<hash>`` by its inputs (the pulled image's id among them)."""
    hook = bootstrap_hook(env_prefix, facts)
    script = thin_script(env_prefix, base_tree, images.bases.user, images.bases.service_user)
    inputs = {"format": IMAGE_FORMAT, "kind": "prebuilt", "image": pulled.image_id, "digest": pulled.digest,
              "tree": base_tree, "export": export_head, "script": content_hash(script, 64), "env_prefix": env_prefix,
              "hook": {path: content_hash(data.decode("latin-1"), 64) for path, data in sorted(hook.items())}}
    inputs_hash = content_hash(inputs)
    tag = f"harness-sweb:{re.sub(r'[^a-z0-9_.-]', '-', name_hint.lower())[:60]}-{inputs_hash}"

    def build() -> None:
        files: dict[str, bytes] = {"thin.sh": script.encode(), "export.tar": export_git}
        copy_hook = ""
        if hook:
            files["hook.tar"] = tar_bytes({path.lstrip("/"): data for path, data in hook.items()}, 0o444)
            copy_hook = "ADD hook.tar /\n"
        labels = images.labels("sweb", inputs_hash, inputs)
        labels.update({f"{LABEL_PREFIX}.prebuilt": pulled.reference, f"{LABEL_PREFIX}.python": f"{env_prefix}/bin/python",
                       f"{LABEL_PREFIX}.python-version": str(facts.get("version", ""))})
        source = pulled.reference if pulled.digest else pulled.name  # a local build has no digest
        dockerfile = (f"FROM {source}\nUSER root\nADD export.tar /opt/harness/export/\n"
                      f"COPY thin.sh /tmp/harness-thin.sh\nRUN bash /tmp/harness-thin.sh && rm /tmp/harness-thin.sh\n"
                      f"{copy_hook}WORKDIR /testbed\nENTRYPOINT []\nCMD [\"sleep\", \"infinity\"]\n")
        images.docker_build(tag, dockerfile, files, labels)

    return images.cached(tag, "sweb", inputs_hash, build, parent_id=pulled.image_id)


def git_dir_tar(export_dir) -> bytes:
    """The export's ``.git`` as a tar (``.git/...``), for the thin layer's build context."""
    import io
    import tarfile
    from pathlib import Path
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(str(Path(export_dir) / ".git"), arcname=".git")
    return buffer.getvalue()
