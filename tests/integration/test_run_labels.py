"""Run ids repeat across output directories (``harness validate`` names its runs gold-1..N):
cleaning up one run directory's containers never touches another's."""

from __future__ import annotations

from harness.engine.sandbox import DockerBackend
from harness.hashing import content_hash


def test_cleanup_of_a_run_spares_the_same_run_id_in_another_directory(engine, tmp_path):
    image = "harness-test-labels:" + content_hash(str(tmp_path))
    base = next(t for i in engine.images.list(name="harness-base") for t in i.tags)
    engine.images.get(base).tag(*image.split(":"))
    mine = DockerBackend(engine, "gold-2", run_dir=content_hash(str(tmp_path / "a" / "gold-2")))
    theirs = DockerBackend(engine, "gold-2", run_dir=content_hash(str(tmp_path / "b" / "gold-2")))
    sandbox = mine.start(image, "labels")
    try:
        assert theirs.cleanup_run() == 0
        assert sandbox.alive()
        assert mine.cleanup_run() == 1
    finally:
        sandbox.close()
        engine.images.remove(image)
