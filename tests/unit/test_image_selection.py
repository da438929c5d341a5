"""The pure selection of harness.imagecache.selection: LRU with shared parents, budget
arithmetic (shared layers once, outside layers never), the code-version filter, sets and
protections. Images are records as harness.imagecache.inventory reads them off an engine."""

from __future__ import annotations

from harness.imagecache.inventory import chain_ids, layer_sizes_from_history
from harness.imagecache.selection import (Accounting, CachedImage, Criteria, harness_bytes, plan, unique_bytes)

NOW = 1_000_000.0
DAY = 86400.0
FORMAT, LAYOUT = 7, 2


def image(name: str, layers: str, *, kind: str | None = None, used: float | None = None, needs: str = "",
          built_from: dict[str, str] | None = None, **extra) -> CachedImage:
    """``layers``: space-separated layer names, bottom first; ``needs``: image names."""
    kind = kind or name.split("-")[0]
    return CachedImage(image_id=f"id-{name}", tags=(f"harness-{kind}:{name}",), kind=kind,
                       layers=tuple(layers.split()), created=NOW - 30 * DAY,
                       last_used=None if used is None else NOW - used, format=extra.pop("format", FORMAT),
                       layout=extra.pop("layout", LAYOUT if kind == "inst" else None),
                       built_from=tuple((k, f"id-{v}") for k, v in (built_from or {}).items()),
                       needs=frozenset(f"id-{n}" for n in needs.split()), **extra)


def criteria(**kwargs) -> Criteria:
    return Criteria(now=NOW, image_format=FORMAT, instance_layout=LAYOUT, **kwargs)


SIZES = {"b": 100, "e": 50, "i1": 10, "i2": 20, "f": 30, "j": 5}


def family(**overrides) -> list[CachedImage]:
    """base <- env-e <- inst-1, inst-2; base <- env-f <- inst-j. Last uses (seconds ago):
    inst-1 9 d, inst-j 7 d, env-f 7 d, inst-2 1 d, env-e 1 d, base 1 d."""
    images = [image("base-x", "b", used=DAY),
              image("env-e", "b e", used=DAY, needs="base-x", built_from={"base": "base-x"}),
              image("inst-1", "b e i1", used=9 * DAY, needs="env-e base-x", built_from={"env": "env-e"}),
              image("inst-2", "b e i2", used=DAY, needs="env-e base-x", built_from={"env": "env-e"}),
              image("env-f", "b f", used=7 * DAY, needs="base-x", built_from={"base": "base-x"}),
              image("inst-j", "b f j", used=7 * DAY, needs="env-f base-x", built_from={"env": "env-f"})]
    return [overrides.get(i.name.split(":", 1)[1], i) for i in images]


def names(decided, goes: bool = True) -> list[str]:
    return [v.image.name.split(":", 1)[1] for v in decided.verdicts if v.goes is goes]


def reason(decided, name: str) -> str:
    return next(v.reason for v in decided.verdicts if v.image.name.endswith(":" + name))


# ---------------------------------------------------------------------------- budget and LRU

def test_shared_layers_are_counted_once():
    assert harness_bytes(family(), Accounting(SIZES)) == 215     # not 100*6 + ...: each layer once
    assert unique_bytes(family(), Accounting(SIZES))["id-inst-1"] == 10
    assert unique_bytes(family(), Accounting(SIZES))["id-env-e"] == 0   # its layer is its children's too


def test_budget_removes_least_recently_used_first_and_stops_when_it_fits():
    decided = plan(family(), Accounting(SIZES), criteria(budget=200))
    assert names(decided) == ["inst-1", "inst-j"]            # 215 - 10 - 5 = 200
    assert [v.freed for v in decided.removals] == [10, 5]
    assert decided.total_before == 215 and decided.total_after == 200 and decided.budget_met
    assert "within the budget" in reason(decided, "inst-2")


def test_a_parent_goes_only_after_all_its_children_and_frees_its_layer_then():
    decided = plan(family(), Accounting(SIZES), criteria(budget=170))
    # env-f (7 d) becomes removable once inst-j is gone, before inst-2 (1 d)
    assert names(decided) == ["inst-1", "inst-j", "env-f"]
    assert decided.removals[-1].freed == 30 and decided.total_after == 170


def test_a_parent_whose_own_use_is_old_is_as_recent_as_its_children():
    # env-e's own record is 20 days old, but inst-2 (1 d) needs it: env-e is no LRU victim before inst-2
    old_env = image("env-e", "b e", used=20 * DAY, needs="base-x", built_from={"base": "base-x"})
    decided = plan(family(**{"env-e": old_env}), Accounting(SIZES), criteria(budget=100))
    assert names(decided) == ["inst-1", "inst-j", "env-f", "inst-2", "env-e"]
    assert decided.total_after == 100 and "base-x" in names(decided, goes=False)


def test_budget_never_removes_a_parent_a_kept_child_needs():
    leased = {"harness-inst:inst-2": "pid 42 on host (harness run)"}
    decided = plan(family(), Accounting(SIZES), criteria(budget=0), leased)
    assert "inst-2" in names(decided, goes=False)
    assert {"env-e", "base-x"} <= set(names(decided, goes=False))
    assert reason(decided, "inst-2") == "leased by pid 42 on host (harness run)"
    assert reason(decided, "env-e") == "needed by harness-inst:inst-2, which stays"
    assert reason(decided, "base-x").startswith("needed by ")
    assert decided.total_after == 100 + 50 + 20 and decided.budget_met is False


def test_layers_held_outside_the_harness_are_neither_counted_nor_freed():
    # a prebuilt image outside the harness holds layer b
    accounting = Accounting(SIZES, external=frozenset({"b"}))
    assert harness_bytes(family(), accounting) == 115
    decided = plan(family(), accounting, criteria(budget=0))
    # everything but the base frees the 115 bytes; the base would free nothing: once the
    # harness's own bytes are 0 the budget is met and it stays
    assert len(decided.removals) == 5 and decided.freed == 115 and decided.budget_met
    assert "within the budget" in reason(decided, "base-x")
    everything = plan(family(), accounting, criteria(level="none"))
    assert next(v for v in everything.removals if v.image.kind == "base").freed == 0


def test_images_outside_the_confinement_stay_and_keep_what_they_need():
    outside = image("inst-1", "b e i1", used=9 * DAY, needs="env-e base-x", in_scope=False)
    decided = plan(family(**{"inst-1": outside}), Accounting(SIZES), criteria(budget=0))
    assert reason(decided, "inst-1") == "outside the confinement (--only-label)"
    assert {"inst-1", "env-e", "base-x"} <= set(names(decided, goes=False))
    # its layers count as held outside the scope: the scope's total is what the scope alone holds
    assert decided.total_before == 215 - 100 - 50 - 10


# ---------------------------------------------------------------------------- criteria

def test_older_than_uses_the_last_use_of_anything_needing_the_image():
    decided = plan(family(), Accounting(SIZES), criteria(older_than=5 * DAY))
    assert names(decided) == ["inst-1", "inst-j", "env-f"]
    assert "last used 1 day ago (not older than 5 days)" in reason(decided, "env-e")
    assert "last used 1 week ago (older than 5 days)" in reason(decided, "env-f")


def test_an_environment_of_another_layout_is_stale_one_without_a_layout_being_layout_1():
    images = family(**{"env-f": image("env-f", "b f", used=7 * DAY, needs="base-x", built_from={"base": "base-x"},
                                      layout=None),
                       "env-e": image("env-e", "b e", used=DAY, needs="base-x", built_from={"base": "base-x"},
                                      layout=2)})
    decided = plan(images, Accounting(SIZES), criteria(stale=True, environment_layout=2))
    assert "environment layout 1, this harness builds 2" in reason(decided, "env-f")
    assert "env-f" in names(decided) and "env-e" not in names(decided)
    # what was built on the stale environment goes with it; nothing else of the current one
    assert "inst-j" in names(decided) and "inst-1" not in names(decided)
    # not checked when the criteria do not name a layout
    assert "env-f" not in names(plan(images, Accounting(SIZES), criteria(stale=True)))


def test_an_image_never_recorded_is_dated_by_its_creation():
    never = image("inst-2", "b e i2", needs="env-e base-x")  # created 30 days ago, no use recorded
    decided = plan(family(**{"inst-2": never}), Accounting(SIZES), criteria(older_than=20 * DAY))
    assert names(decided) == ["inst-2"]


def test_stale_selects_what_this_harness_would_never_reuse():
    images = family(**{
        "inst-1": image("inst-1", "b e i1", used=0, needs="env-e base-x", format=6),
        "inst-j": image("inst-j", "b f j", used=0, needs="env-f base-x", layout=1),
    })
    images.append(image("inst-orphan", "b z", used=0, needs="base-x", built_from={"env": "env-gone"}))
    images.append(CachedImage("id-left", (), "untagged", ("b", "y"), created=NOW - 2 * 3600, needs=frozenset({"id-base-x"})))
    images.append(CachedImage("id-young", (), "untagged", ("b", "w"), created=NOW - 60, needs=frozenset({"id-base-x"})))
    decided = plan(images, Accounting({**SIZES, "z": 1, "y": 1, "w": 1}), criteria(stale=True))
    assert {v.image.image_id for v in decided.removals} == {"id-inst-1", "id-inst-j", "id-inst-orphan", "id-left"}
    assert next(v.reason for v in decided.verdicts if v.image.image_id == "id-left").startswith("untagged: left by")
    assert "image format 6, this harness builds 7" in reason(decided, "inst-1")
    assert "instance layout 1, this harness builds 2" in reason(decided, "inst-j")
    assert "the env image it was built on" in reason(decided, "inst-orphan")
    young = next(v for v in decided.verdicts if v.image.image_id == "id-young")
    assert not young.goes and "a build may be using it" in young.reason
    assert reason(decided, "inst-2") == "current: this harness would reuse it"


def test_criteria_combine_all_must_match():
    stale_old = image("inst-1", "b e i1", used=9 * DAY, needs="env-e base-x", format=6)
    stale_recent = image("inst-2", "b e i2", used=DAY, needs="env-e base-x", format=6)
    decided = plan(family(**{"inst-1": stale_old, "inst-2": stale_recent}), Accounting(SIZES),
                   criteria(stale=True, older_than=5 * DAY))
    assert names(decided) == ["inst-1"]


def test_level_keeps_the_levels_at_and_below_it():
    decided = plan(family(), Accounting(SIZES), criteria(level="env"))
    assert sorted(names(decided)) == ["inst-1", "inst-2", "inst-j"]
    assert reason(decided, "env-e") == "env is kept at level env"
    everything = plan(family(), Accounting(SIZES), criteria(level="none"))
    assert len(everything.removals) == 6 and everything.freed == 215
    order = names(everything)
    assert order.index("inst-1") < order.index("env-e") and order[-1] == "base-x"  # children first


def test_set_removes_only_what_its_instances_use_and_keep_set_protects():
    images = family(**{"inst-1": image("inst-1", "b e i1", used=9 * DAY, needs="env-e base-x",
                                       instances=frozenset({"a__b-1"})),
                       "inst-j": image("inst-j", "b f j", used=7 * DAY, needs="env-f base-x",
                                       instances=frozenset({"c__d-2"}))})
    decided = plan(images, Accounting(SIZES), criteria(in_set=frozenset({"a__b-1", "c__d-2"})))
    # env-f is used only by the set; env-e also by inst-2 (not in the set); base-x by both
    assert sorted(names(decided)) == ["env-f", "inst-1", "inst-j"]
    assert reason(decided, "inst-2") == "not used by the set"
    assert reason(decided, "env-e") == "needed by harness-inst:inst-2, which stays"
    kept = plan(images, Accounting(SIZES), criteria(level="none", keep_set=frozenset({"c__d-2"})))
    assert sorted(names(kept)) == ["env-e", "inst-1", "inst-2"]
    assert reason(kept, "inst-j") == "needed by the kept set (instance c__d-2)"
    assert reason(kept, "env-f") == "needed by the kept set (instance c__d-2)"


def test_containers_and_foreign_tags_protect():
    images = family(**{"inst-1": image("inst-1", "b e i1", used=9 * DAY, needs="env-e base-x",
                                       containers=("run-a-1",)),
                       "inst-j": image("inst-j", "b f j", used=7 * DAY, needs="env-f base-x",
                                       foreign_tags=("mine:latest",))})
    decided = plan(images, Accounting(SIZES), criteria(level="env"))
    assert names(decided) == ["inst-2"]
    assert reason(decided, "inst-1") == "used by container run-a-1"
    assert reason(decided, "inst-j") == "also tagged mine:latest (not the harness's)"


def test_no_criterion_removes_nothing():
    decided = plan(family(), Accounting(SIZES), criteria())
    assert decided.removals == [] and decided.freed == 0


def test_budget_already_met_removes_nothing():
    decided = plan(family(), Accounting(SIZES), criteria(budget=215))
    assert decided.removals == [] and decided.budget_met


# ---------------------------------------------------------------------------- layer accounting inputs

def test_chain_ids_follow_the_image_spec():
    import hashlib
    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    assert chain_ids([a, b]) == (a, "sha256:" + hashlib.sha256(f"{a} {b}".encode()).hexdigest())
    assert chain_ids([a, b])[:1] == chain_ids([a])      # a shared bottom has one chain id


def test_layer_sizes_from_the_engines_history():
    # newest first, as the engine lists it: configuration steps hold no layer
    history = [{"Size": 0, "CreatedBy": "/bin/sh -c #(nop)  LABEL a=b"}, {"Size": 300, "CreatedBy": "COPY x"},
               {"Size": 0, "CreatedBy": "/bin/sh -c #(nop) WORKDIR /testbed"}, {"Size": 1000, "CreatedBy": ""}]
    assert layer_sizes_from_history(history, 2) == ([1000, 300], True)
    # a 0-byte step that is no configuration step (a RUN that wrote nothing) is a layer
    with_empty = [{"Size": 40, "CreatedBy": "/bin/sh -c #(nop) ADD file:x in /"},
                  {"Size": 0, "CreatedBy": "/bin/sh -c touch /x"}, {"Size": 1000, "CreatedBy": ""}]
    assert layer_sizes_from_history(with_empty, 3) == ([1000, 0, 40], True)
    sizes, exact = layer_sizes_from_history([{"Size": 5, "CreatedBy": ""}], 3)
    assert (sizes, exact) == ([5, 0, 0], False) and sum(sizes) == 5


# ---------------------------------------------------------------------------- the command's arguments

def test_sizes_ages_and_sets_are_read_or_refused(tmp_path):
    import argparse
    import json

    import pytest

    from harness.errors import InputError
    from harness.imagecache.commands import age_argument, read_set, size_argument
    assert size_argument("200G") == 200 * 10**9 and size_argument("200GiB") == 200 * 2**30
    assert age_argument("7d") == 7 * 86400 and age_argument("90m") == 5400
    with pytest.raises(argparse.ArgumentTypeError, match="not a size"):
        size_argument("lots")
    with pytest.raises(argparse.ArgumentTypeError, match="not a duration"):
        age_argument("soon")
    good = tmp_path / "set.jsonl"
    good.write_text(json.dumps({"instance_id": "a__b-1", "repo": "a/b"}) + "\n" + json.dumps({"instance_id": "c__d-2"}))
    assert read_set(good, "--set") == {"a__b-1", "c__d-2"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"instance_id": "a__b-1"}) + "\n" + json.dumps({"id": "x"}))
    with pytest.raises(InputError, match="record 2 has no instance_id"):
        read_set(bad, "--keep-set")
