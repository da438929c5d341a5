"""``harness images prune`` against the real engine, on small images this test builds.

The engine is shared (other sessions' images and runs are on it), so every prune here is
confined with ``--only-label`` to a label only this test's images carry, and each test
checks that nothing outside it was selected or removed: a decoy image, stale and in a
second scope of this test's own, must survive every prune. The family built per test:

    base (imported) <- env <- inst-old, inst-new, inst-stale (another image format)
    decoy (imported, another scope, another image format)
"""

from __future__ import annotations

import io
import json
import secrets
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field

import pytest
from docker.errors import APIError, NotFound

from harness.cli import main
from harness.engine.images import stream_build
from harness.engine.layers import IMAGE_FORMAT, tar_bytes
from harness.engine.environment_layer import LAYOUT as ENV_LAYOUT
from harness.engine.instance_layer import LAYOUT
from harness.bookkeeping.usage import UseIndex, engine_state_dir

SCOPE = "org.harness.test-scope"


@dataclass
class Family:
    token: str
    decoy_token: str
    ids: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{SCOPE}={self.token}"


def _labels(kind: str, scope: str, inputs: dict) -> dict[str, str]:
    return {"org.harness.kind": kind, "org.harness.inputs": json.dumps(inputs), "org.harness.inputs-hash": "0",
            SCOPE: scope}


@pytest.fixture
def family(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
    fam = Family(secrets.token_hex(4), secrets.token_hex(4))

    def imported(name: str, kind: str, scope: str, inputs: dict, size: int) -> None:
        tag = f"harness-{kind}:prunetest-{scope}-{name}"
        changes = [f"LABEL {k}={json.dumps(v)}" for k, v in _labels(kind, scope, inputs).items()]
        repo, version = tag.split(":")
        engine.api.import_image_from_data(tar_bytes({f"{name}.bin": secrets.token_bytes(size)}), repository=repo,
                                          tag=version, changes=changes)
        fam.tags[name], fam.ids[name] = tag, engine.images.get(tag).id

    def child(name: str, kind: str, parent: str, inputs: dict, size: int) -> None:
        tag = f"harness-{kind}:prunetest-{fam.token}-{name}"
        context = tar_bytes({"Dockerfile": f"FROM {fam.tags[parent]}\nCOPY payload /{name}.bin\n".encode(),
                             "payload": secrets.token_bytes(size)})
        stream_build(engine, io.BytesIO(context), tag, _labels(kind, fam.token, inputs))
        fam.tags[name], fam.ids[name] = tag, engine.images.get(tag).id

    try:
        imported("base", "base", fam.token, {"format": IMAGE_FORMAT}, 64_000)
        child("env", "env", "base", {"format": IMAGE_FORMAT, "layout": ENV_LAYOUT, "base": fam.ids["base"]}, 128_000)
        inst = {"format": IMAGE_FORMAT, "layout": LAYOUT, "env": fam.ids["env"], "parent": fam.ids["env"]}
        child("inst-old", "inst", "env", inst, 32_000)
        child("inst-new", "inst", "env", inst, 48_000)
        child("inst-stale", "inst", "env", {**inst, "format": IMAGE_FORMAT - 1}, 16_000)
        imported("decoy", "inst", fam.decoy_token, {"format": IMAGE_FORMAT - 1}, 8_000)
        yield fam
    finally:
        for token in (fam.token, fam.decoy_token):
            for container in engine.containers.list(all=True, filters={"label": f"{SCOPE}={token}"}):
                container.remove(force=True)
            mine = engine.images.list(all=True, filters={"label": f"{SCOPE}={token}"})
            for image in sorted(mine, key=lambda i: -len(i.attrs["RootFS"]["Layers"])):  # children first
                try:
                    engine.api.remove_image(image.id, force=True)
                except (NotFound, APIError):
                    pass


@pytest.fixture
def prune(family, capsys):
    """``harness images prune`` confined to the family's scope; returns its JSON."""
    def run(*args: str) -> dict:
        capsys.readouterr()
        assert main(["images", "prune", "--only-label", family.label, "--json", *args]) == 0
        result = json.loads(capsys.readouterr().out)
        outside_goes = [v["tag"] for v in result["images"] if v["goes"] and not v["in_scope"]]
        assert outside_goes == [], "a confined prune selected an image outside its scope"
        return result
    return run


def _exists(engine, image_id: str) -> bool:
    try:
        engine.images.get(image_id)
        return True
    except NotFound:
        return False


def _verdict(result: dict, family: Family, name: str) -> dict:
    return next(v for v in result["images"] if v["id"] == family.ids[name])


def _removed(result: dict) -> set[str]:
    return {v["id"] for v in result["images"] if v["removed"]}


def test_a_stale_image_goes_and_nothing_outside_the_confinement_does(engine, family, prune):
    dry = prune("--stale", "--dry-run")
    assert {v["id"] for v in dry["images"] if v["goes"]} == {family.ids["inst-stale"]}
    assert "image format" in _verdict(dry, family, "inst-stale")["reason"]
    assert _verdict(dry, family, "decoy")["reason"] == "outside the confinement (--only-label)"
    assert _verdict(dry, family, "inst-stale")["freed"] >= 16_000
    assert all(_exists(engine, i) for i in family.ids.values())      # a dry run removes nothing

    done = prune("--stale")
    assert _removed(done) == {family.ids["inst-stale"]}
    assert not _exists(engine, family.ids["inst-stale"])
    assert all(_exists(engine, family.ids[n]) for n in ("base", "env", "inst-old", "inst-new", "decoy"))


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from harness.bookkeeping.leases import Lease
    lease = Lease(Path(sys.argv[1]))
    lease.hold(sys.argv[2])
    print("held", flush=True)
    time.sleep(600)
""")


def test_a_leased_image_survives_while_another_process_holds_the_lease(engine, family, prune):
    lease_dir = engine_state_dir(engine.info()["ID"]) / "leases"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lease_dir), family.tags["inst-stale"]],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        leased = prune("--stale")
        verdict = _verdict(leased, family, "inst-stale")
        assert not verdict["goes"] and verdict["reason"].startswith(f"leased by pid {holder.pid}")
        assert _removed(leased) == set() and _exists(engine, family.ids["inst-stale"])
        # a level that takes every instance: the leased one stays, and so does what it needs
        level = prune("--level", "base")
        assert _removed(level) == {family.ids["inst-old"], family.ids["inst-new"]}
        assert _verdict(level, family, "env")["reason"] == f"needed by {family.tags['inst-stale']}, which stays"
    finally:
        holder.kill()
        holder.wait()
    # the holder is dead: its lease protects nothing
    after = prune("--stale")
    assert _removed(after) == {family.ids["inst-stale"]}
    assert _exists(engine, family.ids["env"]) and _exists(engine, family.ids["decoy"])


def test_the_builder_leases_what_it_looks_up_until_released(engine, family, prune, tmp_path):
    from harness.engine.images import ImageBuilder
    builder = ImageBuilder(engine, tmp_path / "cache")
    assert builder.find(family.tags["inst-new"]).id == family.ids["inst-new"]
    kept = prune("--level", "env")
    assert _verdict(kept, family, "inst-new")["reason"].startswith("leased by pid ")
    assert _removed(kept) == {family.ids["inst-old"], family.ids["inst-stale"]}
    assert _verdict(kept, family, "inst-new")["last_used"] is not None   # the look-up was recorded
    builder.tracker.release()
    assert _removed(prune("--level", "env")) == {family.ids["inst-new"]}


def test_age_and_budget_go_least_recently_used_first(engine, family, prune, capsys):
    index = UseIndex(engine_state_dir(engine.info()["ID"]))
    now = time.time()
    for name in ("base", "env", "inst-new", "inst-stale"):
        index.record_image(family.tags[name], family.ids[name], at=now - 3600)
    index.record_image(family.tags["inst-old"], family.ids["inst-old"], at=now - 10 * 86400)

    aged = prune("--older-than", "7d", "--dry-run")
    assert {v["id"] for v in aged["images"] if v["goes"]} == {family.ids["inst-old"]}
    assert "older than 1 week" in _verdict(aged, family, "inst-old")["reason"]

    capsys.readouterr()
    assert main(["images", "list", "--only-label", family.label, "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    unique = {row["id"]: row["unique"] for row in listing["images"]}
    assert listing["harness_only"] == aged["total_before"]            # one accounting for both commands
    # the family's bytes, each layer once: the sum of what each image alone holds plus the shared env/base
    assert listing["harness_only"] < sum(row["size"] for row in listing["images"])

    # a run's --disk-budget keeps what its own instances need: the next least recently used goes
    from harness.imagecache.commands import prune_for_run
    kept_instance = f"prunetest__{family.token}-1"
    index.record_instance(kept_instance, family.tags["inst-old"])
    need = unique[family.ids["inst-old"]]
    decided, outcomes = prune_for_run(engine, budget=aged["total_before"] - need, instance_ids=frozenset({kept_instance}),
                                      only_label=family.label)
    assert next(v for v in decided.verdicts if v.image.image_id == family.ids["inst-old"]).reason == \
        f"needed by the kept set (instance {kept_instance})"
    assert [o.image_id for o in outcomes if o.removed] == [family.ids["inst-new"]]   # 1 h old; name before inst-stale
    assert decided.budget_met

    budget = aged["total_before"] - unique[family.ids["inst-new"]] - need
    done = prune("--budget", str(budget))
    assert _removed(done) == {family.ids["inst-old"]}                 # the least recently used, and enough
    assert done["freed"] == need and done["budget_met"]
    assert all(_exists(engine, family.ids[n]) for n in ("base", "env", "inst-stale", "decoy"))


def test_a_container_protects_its_image_and_the_runs_cache_level_prunes_its_instances(engine, family, prune):
    container = engine.containers.create(family.tags["inst-new"], command=["true"],
                                         labels={SCOPE: family.token})
    try:
        result = prune("--level", "env", "--dry-run")
        assert _verdict(result, family, "inst-new")["reason"] == f"used by container {container.name}"
        assert {v["id"] for v in result["images"] if v["goes"]} == {family.ids["inst-old"], family.ids["inst-stale"]}
    finally:
        container.remove(force=True)
    # --cache-level env after a run: the images of the run's instances above the level
    from harness.imagecache.commands import prune_for_run
    index = UseIndex(engine_state_dir(engine.info()["ID"]))
    index.record_instance(f"prunetest__{family.token}-1", family.tags["inst-old"])
    decided, outcomes = prune_for_run(engine, level="env", instance_ids=frozenset({f"prunetest__{family.token}-1"}),
                                      only_label=family.label)
    assert [o.image_id for o in outcomes if o.removed] == [family.ids["inst-old"]]
    assert all(_exists(engine, family.ids[n]) for n in ("base", "env", "inst-new", "inst-stale", "decoy"))


def test_sandboxes_a_killed_run_left_go_first_and_free_their_images(engine, family, prune, monkeypatch):
    """A sandbox of a run killed with its engine stays stopped and pins its image. prune
    removes one stopped longer than STOPPED_FOR (shortened here) before it plans, so its
    image can go; a sandbox stopped a moment ago (a live run reads it and removes it) and a
    container without a run id stay, and so do their images."""
    from harness.imagecache import sandboxes
    owner = {"org.harness.owner": "harness", SCOPE: family.token}
    # a sandbox's writable places are named volumes with the harness's labels; a volume not
    # the harness's, mounted too, is not the prune's to remove
    ours = engine.volumes.create(name=f"prunetest-{family.token}-ours", labels=owner)
    theirs = engine.volumes.create(name=f"prunetest-{family.token}-theirs", labels={SCOPE: family.token})
    left = engine.containers.create(family.tags["inst-new"], command=["true"],
                                    labels={**owner, "org.harness.run-id": "killed-run"},
                                    volumes={ours.name: {"bind": "/ours", "mode": "rw"},
                                             theirs.name: {"bind": "/theirs", "mode": "rw"}})
    other = engine.containers.create(family.tags["env"], command=["true"], labels=owner)  # no run id
    time.sleep(8)
    fresh = engine.containers.create(family.tags["inst-old"], command=["true"],
                                     labels={**owner, "org.harness.run-id": "live-run"})
    created = sandboxes._epoch(engine.api.inspect_container(fresh.id)["Created"])

    def threshold() -> None:
        # between the two: `fresh` is younger than it and `left` (8 s older) is not, as long as
        # the prune reads the containers within 4 s of this
        monkeypatch.setattr(sandboxes, "STOPPED_FOR", time.time() - created + 4.0)

    try:
        threshold()
        dry = prune("--level", "env", "--dry-run")
        assert [(s["name"], s["run_id"], s["removed"]) for s in dry["sandboxes"]] == [(left.name, "killed-run", None)]
        assert _verdict(dry, family, "inst-new")["reason"] == f"used by container {left.name}"  # a dry run removes nothing
        threshold()
        done = prune("--level", "env")
        assert [(s["name"], s["removed"]) for s in done["sandboxes"]] == [(left.name, True)]
        with pytest.raises(NotFound):
            engine.containers.get(left.id)
        with pytest.raises(NotFound):
            engine.volumes.get(ours.name)
        assert engine.volumes.get(theirs.name)
        assert _removed(done) == {family.ids["inst-new"], family.ids["inst-stale"]}
        assert _verdict(done, family, "inst-old")["reason"] == f"used by container {fresh.name}"
        assert engine.containers.get(other.id) and engine.containers.get(fresh.id)
        assert all(_exists(engine, family.ids[n]) for n in ("base", "env", "inst-old", "decoy"))
    finally:
        for container in (left, other, fresh):
            try:
                container.remove(force=True)
            except NotFound:
                pass
        for volume in (ours, theirs):
            try:
                volume.remove(force=True)
            except NotFound:
                pass


def test_a_lease_taken_after_the_plan_still_protects_and_strands_no_child(engine, family):
    from harness.imagecache.commands import current_formats
    from harness.imagecache.inventory import read_engine
    from harness.imagecache.prune import carry_out
    from harness.imagecache.selection import Criteria, plan
    state = engine_state_dir(engine.info()["ID"])
    view = read_engine(engine, UseIndex(state), only_label=family.label)
    image_format, layout, env_layout = current_formats()
    decided = plan(view.images, view.accounting, Criteria(now=time.time(), image_format=image_format,
                                                          instance_layout=layout, environment_layout=env_layout,
                                                          level="none"))
    mine = {family.ids[n] for n in ("base", "env", "inst-old", "inst-new", "inst-stale")}
    assert {v.image.image_id for v in decided.removals} == mine
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(state / "leases"), family.tags["inst-stale"]],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        outcomes = {o.image_id: o for o in carry_out(engine, decided, state, only_label=family.label)}
    finally:
        holder.kill()
        holder.wait()
    assert {i for i, o in outcomes.items() if o.removed} == {family.ids["inst-old"], family.ids["inst-new"]}
    assert outcomes[family.ids["inst-stale"]].note.startswith(f"leased by pid {holder.pid}")
    assert "which was not removed" in outcomes[family.ids["env"]].note       # its child stayed: so does it
    assert all(_exists(engine, family.ids[n]) for n in ("base", "env", "inst-stale", "decoy"))
