"""Scaffold pins: exact versions only, one environment per pin (keyed by content), the
shipped lock, and the compromised litellm releases refused wherever they appear."""

from __future__ import annotations

import json

import pytest

from harness.agents import pins
from harness.agents.pins import (COMPROMISED, KNOWN, ScaffoldPin, check_packages, environment_key, locked_packages,
                                 parse_pin)
from harness.errors import InputError

INTERPRETER = {"implementation": "cpython", "version": "3.11", "machine": "x86_64"}


def test_the_default_pin_is_mini_swe_agent_1_15_0_with_its_shipped_lock():
    pin = parse_pin()
    assert (pin.name, pin.version, pin.with_) == ("mini-swe-agent", "1.15.0", ("litellm==1.80.0",))
    assert pin.lock == KNOWN[("mini-swe-agent", "1.15.0")].lock and pin.exclude_newer == "2025-11-18T00:00:00Z"
    assert pin.requirements == ("mini-swe-agent==1.15.0", "litellm==1.80.0")
    # a bare version names mini-swe-agent; naming the shipped litellm again changes nothing
    assert parse_pin("1.15.0") == pin == parse_pin("mini-swe-agent==1.15.0", ["litellm==1.80.0"])


@pytest.mark.parametrize("text", ["mini-swe-agent>=1.15.0", "mini-swe-agent~=1.15", "mini-swe-agent==1.*",
                                  "mini-swe-agent", "mini-swe-agent[full]==1.15.0", "mini-swe-agent==1.15.0; "
                                  "python_version>'3'", "mini-swe-agent @ https://example.org/x.whl",
                                  "mini-swe-agent==", "==1.15.0", "mini-swe-agent===1.15.0"])
def test_a_pin_that_is_not_one_exact_version_is_refused(text):
    with pytest.raises(InputError, match="exact NAME==VERSION") as caught:
        parse_pin(text)
    assert caught.value.field == "--scaffold"


@pytest.mark.parametrize("extra", ["litellm>=1.80", "litellm", "litellm==1.80.*"])
def test_a_loose_companion_requirement_is_refused(extra):
    with pytest.raises(InputError, match="exact") as caught:
        parse_pin("mini-swe-agent==1.15.0", [extra])
    assert caught.value.field == "--scaffold-with"


@pytest.mark.parametrize("version", sorted(COMPROMISED["litellm"]))
def test_the_compromised_litellm_releases_are_refused_when_asked_for(version):
    with pytest.raises(InputError, match="credential stealer"):
        parse_pin("mini-swe-agent==1.15.0", [f"litellm=={version}"])
    with pytest.raises(InputError, match="credential stealer"):
        parse_pin(f"LiteLLM=={version}")          # the name compared as PyPI compares names


@pytest.mark.parametrize("version", sorted(COMPROMISED["litellm"]))
def test_a_lock_or_an_environment_holding_a_compromised_release_is_refused(version, tmp_path):
    lock = f"litellm=={version} \\\n    --hash=sha256:00\nopenai==2.8.1 \\\n    --hash=sha256:11\n"
    with pytest.raises(InputError, match=f"litellm=={version}"):
        check_packages(locked_packages(lock), source="a lock")
    # an environment made earlier (pin.json) that holds one is refused when found, not used
    root = tmp_path / "env"
    root.mkdir()
    (root / "pin.json").write_text(json.dumps({"packages": {"litellm": version}}))
    with pytest.raises(InputError, match="credential stealer"):
        pins._installed(parse_pin(), root, "k")


def test_another_version_or_other_companions_resolve_their_own_lock():
    other = parse_pin("mini-swe-agent==1.14.4")
    assert other.lock is None and other.with_ == (f"litellm=={pins.DEFAULT_LITELLM}",)
    newer = parse_pin("mini-swe-agent==1.15.0", ["litellm==1.81.0"])
    assert newer.lock is None and newer.with_ == ("litellm==1.81.0",) and newer.exclude_newer is None
    with pytest.raises(InputError, match="the scaffold itself"):
        parse_pin("mini-swe-agent==1.15.0", ["mini-swe-agent==1.14.0"])


def test_the_environment_key_changes_with_every_input_and_only_then():
    pin = parse_pin()
    key = environment_key(pin, INTERPRETER)
    assert key == environment_key(parse_pin("1.15.0"), dict(INTERPRETER))
    assert key != environment_key(parse_pin("mini-swe-agent==1.15.0", ["litellm==1.81.0"]), INTERPRETER)
    assert key != environment_key(parse_pin("mini-swe-agent==1.14.4"), INTERPRETER)
    assert key != environment_key(pin, {**INTERPRETER, "version": "3.12"})
    assert key != environment_key(pin, {**INTERPRETER, "machine": "aarch64"})
    unlocked = ScaffoldPin(pin.name, pin.version, pin.with_, pin.exclude_newer, None)
    assert key != environment_key(unlocked, INTERPRETER)   # the lock's bytes are part of it


def test_the_shipped_lock_pins_every_package_exactly_with_hashes_and_nothing_compromised():
    text = parse_pin().lock_text()
    assert text is not None
    packages = locked_packages(text)
    assert packages["mini-swe-agent"] == ["1.15.0"] and packages["litellm"] == ["1.80.0"]
    check_packages(packages, source="the shipped lock")
    requirement_lines = [line for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    assert requirement_lines and all("==" in line and line.rstrip().endswith("\\") for line in requirement_lines)
    assert text.count("--hash=sha256:") >= len(requirement_lines)
    # lean: no extras of mini-swe-agent (its [full] brings datasets, swe-rex, pytest, ...)
    assert not {"datasets", "swe-rex", "pytest", "mkdocs-material"} & set(packages)
