"""A registry that stops answering holds no task (harness/engine/registry.py): the engine's
look-up and push are bounded; the layer is then built here, or left unpushed, and the run
goes on. The engine is faked only to inject the silence."""

from __future__ import annotations

import threading

from harness.engine import registry as registry_mod


class _SilentApi:
    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate
        self.tagged: list = []

    def tag(self, *args) -> None:
        self.tagged.append(args)

    def push(self, *args, **kwargs):
        self.gate.wait(30)       # the engine never answers while the test runs
        yield {"status": "never"}

    def remove_image(self, *args, **kwargs) -> None:
        pass


class _SilentImages:
    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    def get_registry_data(self, ref):
        self.gate.wait(30)
        raise AssertionError("unreachable while the registry is silent")


class _SilentClient:
    def __init__(self) -> None:
        self.gate = threading.Event()
        self.api = _SilentApi(self.gate)
        self.images = _SilentImages(self.gate)


def test_a_silent_registry_means_build_here_and_no_push(monkeypatch):
    monkeypatch.setattr(registry_mod, "LOOKUP_SECONDS", 0.2)
    monkeypatch.setattr(registry_mod, "PUSH_SECONDS", 0.2)
    client = _SilentClient()
    try:
        registry = registry_mod.Registry(client, "127.0.0.1:5000")
        assert registry.fetch("harness-env:py3.11-abc", "hash") is None      # build it here
        assert registry.publish("harness-env:py3.11-abc") is None            # the run goes on unpushed
    finally:
        client.gate.set()


def test_a_bounded_call_gives_its_value_or_its_error():
    assert registry_mod.bounded(lambda: 7, 5) == 7

    def broken():
        raise ValueError("no")
    try:
        registry_mod.bounded(broken, 5)
    except ValueError as exc:
        assert str(exc) == "no"
    else:
        raise AssertionError("the call's own error is raised")
