"""Images between machines: a registry that engines pull layers from instead of building.

With ``--registry HOST:PORT`` every layer (base, builder, environment, instance) is
looked up in the registry under its content-hash tag before it is built
(``HOST:PORT/harness-env:py3.11-<hash>`` for ``harness-env:py3.11-<hash>``), and pushed
there after it is built here. The tag names the inputs, never the content, so what a
pull brings is checked before it is used:

1. the tag is resolved to the manifest digest the registry holds now, and pulled *by
   that digest*: the engine verifies every blob against it;
2. the image's ``org.harness.inputs-hash`` label must be the hash in the tag, and its
   ``org.harness.inputs`` label must hash to it (the image describes the inputs this node
   computed, parent image id included);
3. for a layer on top of another (environment, instance), the pulled image's layers must
   start with the parent's layers as this node has them.

A pull that fails a check is removed and the layer is built here instead (and pushed,
replacing the bad one); an unreachable registry is the same as an empty one. A push that
fails leaves the local image in place: the run does not depend on the registry.

Registries on 127.0.0.0/8 are plain HTTP to the engine by default; any other address
must be listed in each engine's ``insecure-registries`` or serve TLS (see README).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound

from harness.engine.client import CONNECTION_ERRORS
from harness.errors import InfrastructureError
from harness.hashing import content_hash
from harness.logs import get_logger

LABEL_INPUTS_HASH = "org.harness.inputs-hash"
LABEL_INPUTS = "org.harness.inputs"
#: Labels longer than this were cut when the image was built (see ImageBuilder.labels).
LABEL_LIMIT = 60000


@dataclass(frozen=True)
class Pulled:
    """Where a layer came from when it was pulled: ``reference`` is ``name@digest``."""

    reference: str
    seconds: float


class VerificationFailed(Exception):
    pass


#: seconds the engine may take to say what the registry holds under a tag (it answers in
#: milliseconds; a registry that stops answering must not hold a task: the layer is built here)
LOOKUP_SECONDS = 60
#: seconds a push may take before the run goes on without it (a push is never needed for a verdict)
PUSH_SECONDS = 600


class RegistrySilent(InfrastructureError):
    """A registry call did not finish in its time (the call is left to end on its own)."""


def bounded(call, seconds: float):
    """``call()`` in a daemon thread, its result or its exception; RegistrySilent when it has
    not finished in ``seconds`` (the engine's request to the registry stays open until it ends)."""
    import threading
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 — handed to the caller below
            box["error"] = exc
    worker = threading.Thread(target=run, name="registry-call", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise RegistrySilent(f"the registry did not answer in {seconds:.0f} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


class Registry:
    def __init__(self, client: docker.DockerClient, address: str) -> None:
        self.client = client
        self.address = address.rstrip("/")
        if "://" in self.address or "/" in self.address:
            from harness.errors import InputError
            raise InputError(f"expected HOST:PORT, got {address!r}", field="--registry")

    def remote(self, tag: str) -> str:
        """``harness-env:py3.11-abc`` → ``HOST:PORT/harness-env:py3.11-abc``."""
        return f"{self.address}/{tag}"

    # ------------------------------------------------------------------ pull
    def fetch(self, tag: str, inputs_hash: str, parent_id: str | None = None) -> tuple[Any, Pulled] | None:
        """Pull ``tag`` from the registry, verify it, and tag it locally. Returns (the
        local image, how it came) or None when the registry does not have it (or has
        something that fails verification, or does not answer)."""
        log = get_logger(registry=self.address, tag=tag)
        remote = self.remote(tag)
        repository = remote.rsplit(":", 1)[0]
        started = time.monotonic()
        try:
            digest = bounded(lambda: self.client.images.get_registry_data(remote).id, LOOKUP_SECONDS)
        except (NotFound, APIError, DockerException, RegistrySilent, *CONNECTION_ERRORS):
            return None  # absent (or no registry, or one that stopped answering): build it here
        reference = f"{repository}@{digest}"
        try:
            self.client.api.pull(repository, tag=digest)
            image = self.client.images.get(reference)
        except (APIError, NotFound, DockerException, *CONNECTION_ERRORS) as exc:
            log.warning("registry.pull_failed", error=str(exc)[:300])
            return None
        try:
            self._verify(image, tag, inputs_hash, parent_id, reference)
        except VerificationFailed as exc:
            log.error("registry.verification_failed", reference=reference, error=str(exc))
            self._forget(reference)
            return None
        name, _, version = tag.rpartition(":")
        self.client.api.tag(image.id, name, version)
        log.info("registry.pulled", reference=reference)
        return self.client.images.get(tag), Pulled(reference, round(time.monotonic() - started, 3))

    def _verify(self, image: Any, tag: str, inputs_hash: str, parent_id: str | None, reference: str) -> None:
        if reference not in (image.attrs.get("RepoDigests") or []):
            raise VerificationFailed(f"the engine does not record {reference} for the pulled image")
        labels = image.labels or {}
        if labels.get(LABEL_INPUTS_HASH) != inputs_hash or not tag.endswith(inputs_hash):
            raise VerificationFailed(f"inputs hash label {labels.get(LABEL_INPUTS_HASH)!r}, expected {inputs_hash}")
        raw = labels.get(LABEL_INPUTS, "")
        if len(raw) < LABEL_LIMIT:
            try:
                recorded = content_hash(json.loads(raw))
            except ValueError:
                raise VerificationFailed("the inputs label is not JSON") from None
            if recorded != inputs_hash:
                raise VerificationFailed(f"the inputs label hashes to {recorded}, not {inputs_hash}")
        if parent_id is not None:
            try:
                parent = self.client.images.get(parent_id)
            except ImageNotFound:
                raise VerificationFailed(f"parent {parent_id} is not on this engine") from None
            mine = parent.attrs.get("RootFS", {}).get("Layers") or []
            theirs = image.attrs.get("RootFS", {}).get("Layers") or []
            if theirs[:len(mine)] != mine:
                raise VerificationFailed(f"its layers do not start with those of its parent {parent_id[:19]}")

    def _forget(self, reference: str) -> None:
        try:
            self.client.images.remove(reference)
        except (APIError, NotFound, DockerException, *CONNECTION_ERRORS):
            pass

    # ------------------------------------------------------------------ push
    def publish(self, tag: str) -> str | None:
        """Push the local image ``tag`` under its content-hash tag. Returns the manifest
        digest, or None when the push failed (logged; the run goes on)."""
        log = get_logger(registry=self.address, tag=tag)
        remote = self.remote(tag)
        repository, _, version = remote.rpartition(":")
        digest = None
        try:
            self.client.api.tag(tag, repository, version)

            def push() -> str | None:
                pushed = None
                for chunk in self.client.api.push(repository, tag=version, stream=True, decode=True):
                    if "error" in chunk:
                        raise APIError(chunk["error"])
                    pushed = (chunk.get("aux") or {}).get("Digest", pushed)
                return pushed
            digest = bounded(push, PUSH_SECONDS)
        except (APIError, DockerException, RegistrySilent, *CONNECTION_ERRORS) as exc:
            log.warning("registry.push_failed", error=str(exc)[:300])
            return None
        finally:
            try:
                self.client.api.remove_image(remote, noprune=True)  # the local alias only
            except (APIError, NotFound, DockerException, *CONNECTION_ERRORS):
                pass
        log.info("registry.pushed", digest=digest)
        return digest
