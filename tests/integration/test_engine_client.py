"""``run_once``: a one-shot container's output, read only after the container has finished.

``containers.run(..., remove=True)`` of the Docker SDK once returned ``b""`` in CI for a
``cat`` of a file that was there: its log stream is attached after the start and a fast
container can be gone from it. These run many fast containers on the real engine."""

from __future__ import annotations

import docker
import pytest

from harness.engine.client import run_once
from harness.engine.images import ImageBuilder


@pytest.fixture(scope="module")
def base_tag(engine, cache_dir) -> str:
    return ImageBuilder(engine, cache_dir).suite_base("bookworm").tag



def _containers_of(engine, image: str) -> set[str]:
    # only this image's: the engine may be shared with other runs, whose containers come and go
    # (exactly this image: "ancestor" would also match builds on images derived from it)
    image_id = engine.images.get(image).id
    return {c.id for c in engine.containers.list(all=True, filters={"ancestor": image})
            if c.attrs.get("Image") == image_id}


def test_every_fast_container_gives_its_whole_output_and_is_removed(engine, base_tag):
    before = _containers_of(engine, base_tag)
    for round_ in range(25):
        out = run_once(engine, base_tag, ["/bin/sh", "-c", f"printf 'line %s\\n' {round_} done"])
        assert out == f"line {round_}\nline done\n".encode()
    assert _containers_of(engine, base_tag) <= before


def test_a_failing_command_raises_with_its_stderr_and_is_removed(engine, base_tag):
    before = _containers_of(engine, base_tag)
    with pytest.raises(docker.errors.ContainerError) as failure:
        run_once(engine, base_tag, ["/bin/sh", "-c", "echo out; echo broken >&2; exit 7"])
    assert failure.value.exit_status == 7 and b"broken" in failure.value.stderr
    assert _containers_of(engine, base_tag) <= before


def test_it_has_no_network_unless_asked(engine, base_tag):
    interfaces = run_once(engine, base_tag, ["/bin/sh", "-c", "ls /sys/class/net"]).split()
    assert interfaces == [b"lo"]


def test_removing_a_runs_containers_survives_one_vanishing_between_listing_and_inspection(engine, base_tag):
    """Two workers clean up one run: a container listed by one can be removed by the other
    before the listing inspects it. The fault is injected at the inspection: the container is
    removed just before the engine is asked about it. Both must still end removed, no error."""
    from harness.engine.sandbox import remove_labelled
    labels = {"org.harness.test-scope": f"vanish-{id(engine)}"}
    made = [engine.containers.create(base_tag, ["true"], labels=labels) for _ in range(2)]
    vanishing = made[0].id
    original = engine.api.inspect_container

    def inspect_after_another_worker_removed_it(container, *args, **kwargs):
        if container == vanishing:
            engine.api.remove_container(container, force=True)
        return original(container, *args, **kwargs)

    engine.api.inspect_container = inspect_after_another_worker_removed_it
    try:
        remove_labelled(engine, labels)
    finally:
        engine.api.inspect_container = original
        for container in made:
            try:
                engine.api.remove_container(container.id, force=True)
            except docker.errors.NotFound:
                pass
    assert engine.containers.list(all=True, filters={"label": [f"{k}={v}" for k, v in labels.items()]}) == []
