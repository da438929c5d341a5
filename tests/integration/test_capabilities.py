"""A spec whose service needs NET_ADMIN at set-up (as requests' tarpit does): the set-up
runs as the container's root with that capability, and the code under test holds none —
not in its effective set, not in its bounding set — and cannot reconfigure the network."""

from __future__ import annotations

from harness.inputs.demo import DEMO_DIR
from tests.patchgen import base_file, edit, write_predictions

CALCLY = "harness-demo__calcly-1"
SPEC = """\
repo: harness-demo/calcly
defaults:
  python: "3.11"
  requirements: [pytest==8.3.4]
  test_cmd: "python -m pytest -rA -p no:cacheprovider"
  parser: pytest
  env: {PYTEST_DISABLE_PLUGIN_AUTOLOAD: "1"}
  services:
    - name: tarpit
      setup: ["ip addr add 10.255.255.1/32 dev lo"]
      net_admin: true
      command: "sleep 100000"
versions:
  "1.0": {}
"""

PROBE = '''
def _probe():
    import subprocess
    status = open("/proc/self/status").read()
    caps = {l.split(":")[0]: l.split()[1] for l in status.splitlines() if l.startswith("Cap")}
    print("PROBE uid", __import__("os").getuid(), "CapEff", caps["CapEff"], "CapBnd", caps["CapBnd"],
          "CapAmb", caps["CapAmb"])
    addr = subprocess.run(["ip", "-4", "addr", "show", "lo"], capture_output=True, text=True).stdout
    print("PROBE tarpit-address", "10.255.255.1" in addr)
    change = subprocess.run(["ip", "addr", "add", "10.9.9.9/32", "dev", "lo"], capture_output=True, text=True)
    print("PROBE ip-addr-add exit", change.returncode, change.stderr.strip()[:80])


_median = median


def median(values):
    _probe()
    return _median(values)
'''


def test_setup_capability_never_reaches_the_code_under_test(harness_run, tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "calcly.yaml").write_text(SPEC)
    patch = edit(CALCLY, {"calcly/stats.py": base_file(CALCLY, "calcly/stats.py") + PROBE})
    preds = write_predictions(tmp_path / "p.jsonl", {CALCLY: patch})
    run = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", str(preds),
                      "--instance-ids", CALCLY, "--specs", str(specs), run_id="caps")
    report = run.report(CALCLY)
    assert report["status"] == "NO"  # the probe fixes nothing
    assert "service_setup" in [c["phase"] for c in report["commands"]]
    output = (run.root / CALCLY / "test_output.txt").read_text()
    assert "PROBE uid 1000 CapEff 0000000000000000 CapBnd 0000000000000000 CapAmb 0000000000000000" in output
    assert "PROBE tarpit-address True" in output   # the root set-up did run, with NET_ADMIN
    assert "PROBE ip-addr-add exit 2" in output     # ...which the tests cannot use
