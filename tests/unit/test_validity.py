"""The validity report from control runs (pure)."""

from harness.results.validity import instance_validity, validity_report


def _report(status, f2p_ok=(), f2p_bad=(), p2p_ok=(), p2p_bad=(), resolved=None, reason=None):
    return {"status": status, "resolved": status == "FULL" if resolved is None else resolved,
            "error_reason": reason,
            "tests_status": {"FAIL_TO_PASS": {"success": list(f2p_ok), "failure": list(f2p_bad)},
                             "PASS_TO_PASS": {"success": list(p2p_ok), "failure": list(p2p_bad)}}}


F2P, P2P = ["a", "b"], ["c", "d"]


def test_a_sound_instance_is_valid():
    gold = [_report("FULL", F2P, (), P2P)] * 3
    row = instance_validity("x", F2P, P2P, gold, _report("NO", (), F2P, P2P))
    assert row["reference_full"] and row["valid"] and row["reasons"] == []


def test_f2p_tests_passing_without_the_fix_are_named():
    gold = [_report("FULL", F2P, (), P2P)]
    empty = _report("PARTIAL", ["a"], ["b"], P2P)
    row = instance_validity("x", F2P, P2P, gold, empty)
    assert row["f2p_pass_without_fix"] == ["a"]
    assert any("a is in FAIL_TO_PASS but passes without the fix" in r for r in row["reasons"])
    assert row["valid"]  # still a usable instance: the other F2P test detects the bug


def test_an_instance_the_empty_patch_resolves_is_not_valid():
    row = instance_validity("x", F2P, P2P, [_report("FULL", F2P, (), P2P)], _report("FULL", F2P, (), P2P))
    assert row["empty_resolved"] and not row["valid"]
    assert sorted(row["f2p_pass_without_fix"]) == F2P


def test_flaky_tests_and_p2p_failures_with_the_reference_are_reported():
    gold = [_report("FULL", F2P, (), P2P), _report("NO", F2P, (), ["c"], ["d"]), _report("FULL", F2P, (), P2P)]
    row = instance_validity("x", F2P, P2P, gold, _report("NO", (), F2P, P2P))
    assert row["flaky_tests"] == ["d"]
    assert row["p2p_fail_with_reference"] == ["d"]
    assert not row["reference_full"] and not row["valid"]
    assert row["reference_statuses"] == ["FULL", "NO", "FULL"]


def test_invalid_repeats_are_not_counted_as_flips_and_say_why():
    gold = [_report("FULL", F2P, (), P2P), _report("INVALID", (), F2P, (), P2P, reason="timeout")]
    row = instance_validity("x", F2P, P2P, gold, None)
    assert row["flaky_tests"] == []
    assert any("repeat 2 is INVALID: timeout" in r for r in row["reasons"])


def test_set_counts_use_the_validated_instances_as_denominator():
    rows = [instance_validity("x", F2P, P2P, [_report("FULL", F2P, (), P2P)], _report("NO", (), F2P, P2P)),
            instance_validity("y", F2P, P2P, [_report("NO", (), F2P, P2P)], _report("NO", (), F2P, P2P))]
    report = validity_report(rows, repeats=1)
    assert report["instances_validated"] == 2
    assert report["reference_full_in_every_repeat"] == 1 and report["valid_instances"] == 1


def _canaries(*entries):
    return [{"test_id": t, "mutation": f"int 1 -> 2; name {t}", "observed": seen, "verdict": "ok" if seen == "ok"
             else "disproved"} for t, seen in entries]


def test_canary_instability_is_reported_beside_flakiness():
    """Every repeat plants the same canaries: one that never failed with the reference
    patch is disproved, one that failed in some repeats only is unstable; both are named,
    neither makes the instance invalid (they are dropped, never charged)."""
    gold = []
    for seen_b in ("ok", "passed_with_original", "ok"):
        report = _report("FULL", F2P, (), P2P)
        report["integrity"] = {"canaries": _canaries(("t::a_c", "ok"), ("t::b_c", seen_b),
                                                     ("t::c_c", "passed_with_original"))}
        gold.append(report)
    gold[2]["integrity"]["canaries"].append({"test_id": "t::d_c", "mutation": "x"})  # planted, never judged
    for report, seen in zip(gold, ("ok", "ok", "passed")):   # --perturbed-run: a change in place, judged alike
        report["integrity"]["perturbed_run"] = {"perturbations": _canaries(("t::a", seen))}
    row = instance_validity("x", F2P, P2P, gold, _report("NO", (), F2P, P2P))
    assert row["canaries"] == [3, 3, 4]
    assert row["canaries_disproved"] == ["t::c_c"] and row["canaries_unstable"] == ["t::a", "t::b_c"]
    assert row["valid"] and row["flaky_tests"] == []
    assert any("t::b_c failed in some reference repeats only" in r for r in row["reasons"])
    from harness.results.validity import render_markdown
    table = render_markdown(validity_report([row], 3))
    assert "| canaries | canaries disproved | canaries unstable |" in table and "| 0 | 4 | 1 | 2 |" in table
