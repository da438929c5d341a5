"""An image's labels are written as one ``LABEL`` instruction of its Dockerfile, and come out
exactly as given.

The engine's build API adds a step per label it is passed (a container created and
committed each); the harness writes them as one instruction instead. A label value is data
(an instance's inputs as JSON, a spec's variables): quotes, ``$`` and backslashes in it must
reach the image unchanged, never substituted, and a label that cannot be written safely goes
through the API as before."""

from __future__ import annotations

import json
import uuid

import pytest

from harness.engine.images import ImageBuilder
from harness.engine.layers import label_instruction
from harness.errors import ImageBuildError


@pytest.fixture(scope="module")
def builder(engine, cache_dir) -> ImageBuilder:
    return ImageBuilder(engine, cache_dir)


@pytest.fixture(scope="module")
def base_tag(builder) -> str:
    return builder.suite_base("bookworm").tag


HOSTILE_VALUES = {
    "org.harness.test.inputs": json.dumps({"env_vars": {"PATH": "$PATH:/x", "Q": 'say "hi" \\ ${HOME}'},
                                           "script": "a\\b", "tab": "\t"}, sort_keys=True),
    "org.harness.test.dollar": "$HOME ${HOME} $(id) `id`",
    "org.harness.test.backslash-end": "ends with \\",
    "org.harness.test.quote": '"',
    "org.harness.test.space": "  two  spaces  ",
    "org.harness.test.empty": "",
    "org.harness.test.unicode": "ünïcødé ✓",
}


def _build(builder, engine, base_tag, labels):
    tag = f"tmp-build-labels:{uuid.uuid4().hex[:12]}"
    image = builder.docker_build(tag, f"FROM {base_tag}\nENV HARNESS_TEST_MARK={uuid.uuid4().hex}\n", {}, labels)
    return tag, image


def test_labels_come_out_exactly_as_given_in_one_step(builder, engine, base_tag):
    tag, image = _build(builder, engine, base_tag, HOSTILE_VALUES)
    try:
        labels = engine.images.get(tag).labels
        assert {k: labels.get(k) for k in HOSTILE_VALUES} == HOSTILE_VALUES
        added = [entry for entry in engine.api.history(tag)
                 if "LABEL" in (entry.get("CreatedBy") or "") and "org.harness.test" in entry["CreatedBy"]]
        assert len(added) == 1, [entry["CreatedBy"][:120] for entry in added]
        assert len(engine.api.history(tag)) == len(engine.api.history(base_tag)) + 2  # ENV and one LABEL
    finally:
        engine.images.remove(tag, force=True)


def test_a_label_with_a_line_break_goes_through_the_api_and_still_comes_out_exact(builder, engine, base_tag):
    labels = {"org.harness.test.lines": "one\ntwo", "org.harness.test.plain": "x"}
    assert label_instruction(labels) is None
    tag, _ = _build(builder, engine, base_tag, labels)
    try:
        got = engine.images.get(tag).labels
        assert {k: got.get(k) for k in labels} == labels
    finally:
        engine.images.remove(tag, force=True)


def test_an_image_whose_labels_differ_from_the_given_ones_is_refused_and_removed(builder, engine, base_tag,
                                                                                monkeypatch):
    """The check after the build: an instruction that lost a label (here a writer that drops
    one, the fault injected) must not leave an image whose labels name other inputs."""
    import harness.engine.images as images_module
    real = images_module.label_instruction
    monkeypatch.setattr(images_module, "label_instruction",
                        lambda labels: real({k: v for k, v in labels.items() if k != "org.harness.test.quote"}))
    tag = f"tmp-build-labels:{uuid.uuid4().hex[:12]}"
    with pytest.raises(ImageBuildError, match="org.harness.test.quote"):
        builder.docker_build(tag, f"FROM {base_tag}\nENV HARNESS_TEST_MARK={uuid.uuid4().hex}\n", {}, HOSTILE_VALUES)
    assert engine.images.list(name=tag) == []
