"""The cores a test process sees, against the real engine: by default those of the engine
host (no quota, as SWE-bench's containers), under ``--cpus`` a CFS quota of that many;
each run's report.json says which (harness/engine/cpus.py)."""

from __future__ import annotations

import json
import re

from tests.patchgen import demo_instance, file_diff

CALCLY = "harness-demo__calcly-1"
#: a test of the instance's test patch: prints what its own process sees (pytest -rA shows it)
PROBE = '''import json, os


def _read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def test_cores_seen():
    print("HARNESS-CORES " + json.dumps({
        "cpu_count": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
        "v1_quota": _read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
        "v1_period": _read("/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
        "v1_shares": _read("/sys/fs/cgroup/cpu/cpu.shares"),
        "v2_max": _read("/sys/fs/cgroup/cpu.max")}))
'''


def _seen(output: str) -> dict:
    found = re.findall(r"^HARNESS-CORES (\{.*\})$", output, re.M)
    assert found, output[-3000:]
    return json.loads(found[-1])


def _quota(seen: dict) -> float | None:
    """Cores the cgroup allows (None: no quota), cgroup v1 or v2."""
    if seen["v2_max"] is not None:
        quota, period = seen["v2_max"].split()
        return None if quota == "max" else int(quota) / int(period)
    quota = int(seen["v1_quota"])
    return None if quota < 0 else quota / int(seen["v1_period"])


def test_a_sandbox_sees_the_engine_hosts_cores_unless_capped(harness_run, tmp_path, engine):
    record = dict(demo_instance(CALCLY))
    record["test_patch"] += file_diff("tests/test_cores.py", None, PROBE)
    record["PASS_TO_PASS"] = [*record["PASS_TO_PASS"], "tests/test_cores.py::test_cores_seen"]
    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps(record) + "\n")
    host_cores = engine.info()["NCPU"]
    common = ("--instances", str(instances), "--predictions", "gold")

    free = harness_run(*common, run_id="cores-free")
    report = free.report(CALCLY)
    assert report["status"] == "FULL", report["error_detail"]
    seen = _seen((free.root / CALCLY / "test_output.txt").read_text())
    assert _quota(seen) is None and seen["cpu_count"] == host_cores, seen
    if seen["v1_shares"] is not None:  # cgroup v1: what pylint counts cores from without a quota
        assert int(seen["v1_shares"]) // 1024 == host_cores, seen
    assert report["resources"]["cpus"] == {"cpus": None, "engine_cores": host_cores, "cap": None,
                                           "cap_source": None, "shares": 1024 * host_cores}

    capped = harness_run(*common, "--cpus", "0.5", run_id="cores-capped")
    report = capped.report(CALCLY)
    assert report["status"] == "FULL", report["error_detail"]
    seen = _seen((capped.root / CALCLY / "test_output.txt").read_text())
    assert _quota(seen) == 0.5, seen
    assert report["resources"]["cpus"] == {"cpus": 0.5, "engine_cores": host_cores, "cap": 0.5, "cap_source": "run",
                                           "shares": 512}
    assert "skipped_under_cpu_cap" not in report["integrity"]["flags"]  # nothing graded was skipped
