"""The cores a sandbox gets (harness.engine.cpus), the spec field and the CLI option that
cap them, and how a skip under a cap shows in the judgement."""

from __future__ import annotations

import json
import textwrap

import pytest

from harness.cli import build_parser
from harness.engine.cpus import RUN, SPEC, CpuLimit, cpu_limit, skipped_under_cap
from harness.inputs.spec_fields import check_cap
from harness.errors import InputError
from harness.grading.status import InstanceStatus
from harness.inputs.instances import parse_instance
from harness.integrity.judge import RunContext, judge_run
from harness.results.report import InstanceResult
from harness.inputs.specs import SpecRegistry


def test_no_cap_is_no_quota_the_engine_hosts_cores():
    limit = cpu_limit(None, None, 8)
    assert (limit.cpus, limit.engine_cores, limit.nano_cpus, limit.cap) == (None, 8, 0, None)
    assert limit.shares == 8 * 1024          # what cgroup v1 readers (pylint) count cores from
    assert cpu_limit(None, None, None).shares is None and cpu_limit(0.5, None, 8).shares == 512
    assert cpu_limit(None, None, 1000).shares == 262144


@pytest.mark.parametrize("run_cap, spec_cap, cores, expected", [
    (2.0, None, 8, (2.0, RUN)),
    (None, 1.5, 8, (1.5, SPEC)),
    (4.0, 1.0, 8, (1.0, SPEC)),          # the smaller cap wins
    (1.0, 4.0, 8, (1.0, RUN)),
    (3.0, None, None, (3.0, RUN)),       # the engine did not say: the cap is kept
])
def test_a_cap_is_a_quota_of_that_many_cores(run_cap, spec_cap, cores, expected):
    limit = cpu_limit(run_cap, spec_cap, cores)
    assert (limit.cpus, limit.cap_source) == expected and limit.nano_cpus == int(expected[0] * 1e9)


def test_a_cap_at_or_above_the_hosts_cores_sets_no_quota():
    for cap in (2.0, 16.0):
        limit = cpu_limit(cap, None, 2)
        assert limit.cpus is None and limit.nano_cpus == 0 and limit.cap == cap  # asked for, recorded


def test_the_record_round_trips_and_refuses_other_shapes():
    for limit in (cpu_limit(None, None, 2), cpu_limit(1.0, None, 2), cpu_limit(None, 0.5, None)):
        assert CpuLimit.from_dict(json.loads(json.dumps(limit.as_dict()))) == limit
    assert CpuLimit.from_dict(None) is None and CpuLimit.from_dict({"cpus": "1"}) is None


@pytest.mark.parametrize("value", [0, -1, True, "2", float("inf")])
def test_a_cap_must_be_a_positive_number_of_cores(value):
    with pytest.raises(ValueError, match="where: must be a positive number of cores"):
        check_cap(value, "where")


def test_skips_are_named_only_under_a_quota():
    assert skipped_under_cap(cpu_limit(None, None, 2), ["t::a"]) is None
    assert skipped_under_cap(cpu_limit(1.0, None, 2), []) is None
    assert skipped_under_cap(cpu_limit(4.0, None, 2), ["t::a"]) is None       # no quota was set
    assert skipped_under_cap(cpu_limit(1.0, None, 2), ["t::b", "t::a", "t::a"]) == {
        "cpus": 1.0, "engine_cores": 2, "cap_source": RUN, "tests": ["t::a", "t::b"]}


def _spec_dir(tmp_path, cpus_line: str):
    (tmp_path / "o__r.yaml").write_text(textwrap.dedent(f"""\
        repo: o/r
        defaults:
          python: "3.11"
        versions:
          "1.0": {{}}
          "2.0": {{{cpus_line}}}
        """))
    return SpecRegistry.load(tmp_path)


def test_the_spec_field_caps_one_version(tmp_path):
    registry = _spec_dir(tmp_path, "cpus: 1")
    assert registry.get("o/r", "1.0").cpus is None and registry.get("o/r", "2.0").cpus == 1.0


@pytest.mark.parametrize("bad", ["cpus: 0", "cpus: many", "cpus: true"])
def test_a_bad_spec_cap_is_refused_naming_the_field(tmp_path, bad):
    with pytest.raises(InputError) as caught:
        _spec_dir(tmp_path, bad).get("o/r", "2.0")
    assert caught.value.field == "cpus" and "positive number of cores" in str(caught.value)


def test_the_cli_option(capsys):
    assert build_parser().parse_args(["run", "--cpus", "1.5"]).cpus == 1.5
    assert build_parser().parse_args(["run"]).cpus is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--cpus", "0"])
    assert "positive number of cores" in capsys.readouterr().err


_RECORD = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "a" * 40, "patch": "",
           "test_patch": "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n-x\n+y\n",
           "FAIL_TO_PASS": ["t.py::f"], "PASS_TO_PASS": ["t.py::jobs", "t.py::k"], "version": "1.0"}
_JUNIT = (b'<testsuite><testcase classname="t" name="f" file="t.py"/>'
          b'<testcase classname="t" name="jobs" file="t.py"><skipped message="Need 2 or more cores"/></testcase>'
          b'<testcase classname="t" name="k" file="t.py"/></testsuite>')


def test_a_graded_test_skipped_under_a_cap_is_flagged_not_failed():
    instance = parse_instance(_RECORD)
    capped = judge_run(instance, "pytest-junit", "", _JUNIT, 0, RunContext(cpu=cpu_limit(1.0, None, 2)))
    assert capped.verdict.status is InstanceStatus.FULL                       # a skip is kept, as before
    assert "skipped_under_cpu_cap" in capped.flags
    assert capped.details["skipped_under_cpu_cap"]["tests"] == ["t.py::jobs"]
    free = judge_run(instance, "pytest-junit", "", _JUNIT, 0, RunContext(cpu=cpu_limit(None, None, 2)))
    assert "skipped_under_cpu_cap" not in free.flags


def test_the_report_keeps_the_limit():
    result = InstanceResult("o__r-1", "o/r", "m", InstanceStatus.NO, resources={"cpus": cpu_limit(1.0, None, 2).as_dict()})
    again = InstanceResult.from_report(json.loads(json.dumps(result.to_report())))
    assert again.resources == result.resources and again.to_report()["resources"]["cpus"]["cpus"] == 1.0
