"""Refusing, before anything runs, instances whose graded ids the spec's runner cannot address.

A graded id that no result can ever carry would only count as "missing", i.e. failed, on
every run: the instance would be graded NO whatever the patch did. Such an instance is
refused loudly at load time (and again at preparation, for other entry points), naming
the instance, the field and the ids. Fragments of log lines that a dataset's own parser
mistook for ids (``[100%]`` in pytest-dev__pytest-5227) are not refused: they are a
documented dataset defect, left out of grading and reported (``dataset_ids_ignored``).

A record that names the SWE-bench log parser its ids came from (``log_parser``, as
SWE-bench Verified records do) is refused when the spec's id convention spells ids
differently.
"""

from __future__ import annotations

from typing import Iterable

from harness.errors import InputError, UnknownNameError
from harness.grading.conventions import IdKind, convention_for_swebench_parser, get_convention
from harness.inputs.instances import Instance


def unaddressable_ids(instance: Instance, convention: str) -> dict[str, list[str]]:
    """Graded ids the convention cannot address, by field (FAIL_TO_PASS / PASS_TO_PASS)."""
    classify = get_convention(convention).classify
    found = {"FAIL_TO_PASS": [t for t in instance.fail_to_pass if classify(t) is IdKind.UNADDRESSABLE],
             "PASS_TO_PASS": [t for t in instance.pass_to_pass if classify(t) is IdKind.UNADDRESSABLE]}
    return {k: v for k, v in found.items() if v}


def instance_id_problem(instance: Instance, runner: str, convention: str, source: str = "") -> InputError | None:
    """Why the instance's graded ids cannot be graded with this runner and convention."""
    recorded = instance.extra.get("log_parser")
    if isinstance(recorded, str):
        expected = convention_for_swebench_parser(recorded)
        if expected is not None and get_convention(expected).to_dataset is not get_convention(convention).to_dataset:
            return InputError(f"the record's ids come from SWE-bench's {recorded} (id convention {expected!r}) "
                              f"but its spec grades them as {convention!r}: set id_convention: {expected} in the spec",
                              record=instance.instance_id, field="log_parser", source=source or None)
    bad = unaddressable_ids(instance, convention)
    if not bad:
        return None
    field, ids = next(iter(bad.items()))
    total = sum(len(v) for v in bad.values())
    shown = ", ".join(repr(t) for v in bad.values() for t in v[:5])
    return InputError(f"{total} test id(s) cannot name a test that the {runner} runner reports under the "
                      f"{convention!r} id convention (they could only ever be missing): {shown}",
                      record=instance.instance_id, field=field, source=source or None)


def refuse_unaddressable(instances: Iterable[Instance], specs, source: str = "") -> tuple[list[Instance],
                                                                                          list[InputError]]:
    """Split instances into those their spec can grade and one error per refused one.
    Instances without a spec are kept (preparation reports them)."""
    kept, refused = [], []
    for instance in instances:
        try:
            spec = specs.get(instance.repo, instance.version)
        except UnknownNameError:
            kept.append(instance)
            continue
        problem = instance_id_problem(instance, spec.runner, spec.id_convention, source)
        (refused.append(problem) if problem else kept.append(instance))
    return kept, refused
