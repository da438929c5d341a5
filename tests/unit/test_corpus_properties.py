"""The corpus's attacks on the integrity properties (harness.integrity.corpus.properties),
generated against the demo instances (pure: the engine runs them in
tests/integration/test_adversarial_integrity.py and ``harness audit``)."""

from __future__ import annotations

import pytest

from harness.integrity.corpus import build_corpus
from harness.integrity.corpus.target import make_target
from harness.integrity.scan import added_findings
from harness.integrity.scan_rules import TAMPER
from harness.integrity.testpatch import apply_test_patch
from harness.patches import patch_files
from tests.patchgen import base_file, demo_instance, demo_paths

PROPERTY_CLASSES = {"canary-pairing", "code-loading", "compiled", "size-cap", "runner-rebinding", "reinstall"}
BASES = ("harness-demo__calcly-1", "harness-demo__inventory-1", "harness-demo__textkit-1")


def _attacks(base: str) -> dict:
    target = make_target(demo_instance(base), lambda p: base_file(base, p), demo_paths(base))
    return {a.slug: a for a in build_corpus(target)}


def _tamper_categories(base: str, patch: str) -> set[str]:
    """What the scans make tampering in the files the patch leaves."""
    def pristine(path):
        text = base_file(base, path)
        return None if text is None else (text.encode(), 0o644)
    files = apply_test_patch(patch, patch_files(patch), pristine).files
    out = set()
    for path, (data, _) in files.items():
        old = base_file(base, path)
        out |= {f.category for f in added_findings(data, None if old is None else old.encode(), path)[0]}
    return out & TAMPER


@pytest.mark.parametrize("base", BASES)
def test_every_property_class_is_generated_for_the_instance(base):
    classes = {a.klass for a in _attacks(base).values()}
    assert PROPERTY_CLASSES <= classes, PROPERTY_CLASSES - classes


@pytest.mark.parametrize("slug", ["canary-pairs-unnamed", "rebind-while-running", "rebind-at-import"])
def test_runtime_attacks_carry_nothing_the_scans_call_tampering(slug):
    """Only the runner identity check can catch these: a scan finding would make their
    engine test prove the scan again instead."""
    base = BASES[0]
    assert _tamper_categories(base, _attacks(base)[slug].patch) == set()


@pytest.mark.parametrize("slug", ["load-spec-from-file", "load-runpy", "load-exec-open-read", "load-marshal",
                                  "load-zipimport", "load-pth-addsitedir"])
def test_loading_attacks_are_seen_by_their_loading_only(slug):
    """The loaded file names no runner: what makes them tampering is the loading."""
    base = BASES[0]
    assert _tamper_categories(base, _attacks(base)[slug].patch) == {"code_loading"}
