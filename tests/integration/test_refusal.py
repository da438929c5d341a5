"""Loading a set whose graded ids the spec's runner cannot address fails loudly, through
the real command line: the instance is refused before any container starts, named on
stderr and in summary.json's input errors, and never graded."""

from __future__ import annotations

import json

from harness.inputs.specs import DEFAULT_SPECS_DIR


def test_unaddressable_set_is_refused_loudly_by_the_cli(tmp_path, capsys):
    """`harness run` refuses the instance before any container starts: reported on stderr
    and in summary.json's input errors, never graded."""
    from harness.cli import main
    from harness.inputs.demo import DEMO_DIR
    specs = tmp_path / "specs"
    specs.mkdir()
    # the demo calcly repository graded under sympy's id convention: its node ids name nothing
    (specs / "calcly.yaml").write_text((DEFAULT_SPECS_DIR / "harness-demo__calcly.yaml").read_text()
                                       .replace("parser: pytest", "parser: pytest\n  id_convention: sympy"))
    records = [json.loads(line) for line in (DEMO_DIR / "instances.jsonl").read_text().splitlines()]
    calcly = [r for r in records if r["repo"] == "harness-demo/calcly"][:1]
    instances = tmp_path / "one.jsonl"
    instances.write_text(json.dumps(calcly[0]) + "\n")
    code = main(["run", "--instances", str(instances), "--predictions", "gold", "--specs", str(specs),
                 "--output-dir", str(tmp_path / "runs"), "--run-id", "refused", "--quiet",
                 "--cache-dir", str(tmp_path / "cache")])
    err = capsys.readouterr().err
    assert code == 0
    assert "refused:" in err and calcly[0]["instance_id"] in err and "sympy" in err
    summary = json.loads((tmp_path / "runs" / "refused" / "summary.json").read_text())
    assert list(summary["input_errors"]) == [calcly[0]["instance_id"]]
    assert summary["error_ids"] == [calcly[0]["instance_id"]] and summary["completed_ids"] == []
