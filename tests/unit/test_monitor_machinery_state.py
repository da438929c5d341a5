"""What the monitor remembers to stay cheap on import-heavy code, and that it answers as a full
check would (issue 38).

* Pythons 3.8 and 3.9 (Debian's 3.9.2, the py3.9 environments' interpreter) raise
  ``code.__new__`` for every code object the import machinery's ``compile``/``marshal.loads``
  makes: 83,000 in one pytest-5103 run. The machinery's state is compared once, at the call's
  own event, and its code objects are answered from it.
* A code object's kind is recomputed only when its own file's genuineness changes (a verified
  import or a claim of that file), not at every import of any file.

The host's pyenv Pythons no longer raise ``code.__new__`` from marshal, so the frames of the
machinery's functions are stood in for by functions of this file, registered in a fresh copy of
the module as the machinery's (the real machinery's frames: tests/integration/test_bootstrap_reach.py
on the environments' own interpreters)."""

from __future__ import annotations

import importlib.util
import sys
from types import SimpleNamespace

from harness.runners import INCONTAINER_SOURCE


def fresh_genuine():
    """A copy of ``_harness_genuine`` with its own state."""
    spec = importlib.util.spec_from_file_location("_genuine_under_test", INCONTAINER_SOURCE / "_harness_genuine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def machinery_call(genuine, *, event: bool = True, meanwhile=lambda: None):
    """Stands in for ``_compile_bytecode``: its ``marshal.loads`` event (``event``: Debian's
    3.9.2 raises none), then two code objects made by that call (``meanwhile`` runs between
    them), answered as the hook answers their ``code.__new__``. Returns (the event's answer,
    the first code object's, the second's)."""
    frame = sys._getframe()
    at_event = genuine.by_import_machinery(frame, "compile_bytecode") if event else None
    first = genuine.made_by_import_machinery(frame)
    meanwhile()
    return at_event, first, genuine.made_by_import_machinery(frame)


def other_call(genuine):
    return genuine.made_by_import_machinery(sys._getframe())


def with_machinery():
    genuine = fresh_genuine()
    part = SimpleNamespace(loads=object())
    genuine._GENUINE["frames"] = {"compile_bytecode": machinery_call.__code__}
    genuine._GENUINE["machinery"] = [(part, "loads", part.loads)]
    return genuine, part


def test_code_objects_of_an_intact_machinery_call_claim_nothing():
    genuine, _ = with_machinery()
    assert machinery_call(genuine) == (True, True, True)
    assert machinery_call(genuine, event=False) == (None, True, True)


def test_code_objects_of_a_call_made_with_a_changed_machinery_are_not_the_machinerys():
    genuine, part = with_machinery()
    original = part.loads
    part.loads = object()
    assert machinery_call(genuine) == (False, False, False)
    assert machinery_call(genuine, event=False) == (None, False, False)
    # and a later call, after the machinery was put back, is compared afresh
    part.loads = original
    assert machinery_call(genuine) == (True, True, True)


def test_the_answer_is_the_state_at_the_calls_first_event():
    # what marshal makes was decided by the bytes and the machinery at the call: a change in
    # the middle of the C call (only another audit hook could make one) does not change it,
    # and the next call sees the change (with its marshal.loads event, or without one)
    for event in (True, False):
        genuine, part = with_machinery()

        def change(part=part):
            part.loads = object()
        assert machinery_call(genuine, event=event, meanwhile=change)[1:] == (True, True)
        assert machinery_call(genuine, event=event)[1:] == (False, False)


def test_after_an_event_of_another_kind_the_call_is_compared_afresh_and_its_frame_let_go():
    genuine, part = with_machinery()

    def change_and_another_event():
        part.loads = object()
        genuine.forget_machinery_call()
        assert genuine._GENUINE["intact"][0] is None
    assert machinery_call(genuine, meanwhile=change_and_another_event) == (True, True, False)


def test_code_made_by_any_other_frame_is_never_the_machinerys():
    genuine, _ = with_machinery()
    assert machinery_call(genuine) == (True, True, True)
    assert other_call(genuine) is False


def test_the_file_a_changed_machinery_was_loading_is_named():
    genuine = fresh_genuine()

    def compile_bytecode(data, source_path=None):
        return genuine.machinery_target(sys._getframe())
    genuine._GENUINE["frames"] = {"compile_bytecode": compile_bytecode.__code__}
    assert compile_bytecode(b"", source_path="/usr/lib/python3/csv.py") == "/usr/lib/python3/csv.py"
    assert compile_bytecode(b"") is None
    assert genuine.machinery_target(sys._getframe()) is None   # not the machinery's function


def test_a_kind_is_recomputed_when_its_own_file_changes_and_only_then(monkeypatch):
    genuine = fresh_genuine()
    computed = []
    real = genuine._kind

    def counting(code):
        computed.append(code)
        return real(code)
    monkeypatch.setattr(genuine, "_kind", counting)

    def probe():
        return 1
    code = probe.__code__
    assert genuine.kind(code) == "c" and len(computed) == 1
    genuine.kind(code)
    genuine.claim("/usr/lib/python3/some_other_file.py")
    genuine._GENUINE["modules"]["/usr/lib/python3/another.py"] = []
    genuine._changed("/usr/lib/python3/another.py")   # a verified import of another file
    assert genuine.kind(code) == "c" and len(computed) == 1
    genuine.claim(code.co_filename)
    genuine.kind(code)
    assert len(computed) == 2


def test_a_code_object_renamed_in_place_gets_its_kind_afresh(monkeypatch):
    # ``_imp._fix_co_filename`` renames a code object in place: its kind is not the old file's
    import _imp
    genuine = fresh_genuine()

    def probe():
        return 1
    code = probe.__code__
    first = genuine.kind(code)
    renamed = "/testbed/renamed.py"
    _imp._fix_co_filename(code, renamed)
    assert code.co_filename == renamed
    assert genuine._KINDS[id(code)][3] == first
    genuine.kind(code)
    assert genuine._KINDS[id(code)][2] == renamed
