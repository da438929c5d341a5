"""Where the compiler goes (Preparer._environment_images): a spec that keeps its compiler puts
its environment on the interpreter with the compiler, the image the sdist builder uses, so the
compiler's packages are installed once per interpreter and not again on every environment
(Verified's cold run at ea6d248 installed them on 5 astropy environments, 20–30 s each); a spec
that compiles only while building keeps a test image without it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.engine.layers import ImageRef
from harness.preparation.preparer import Preparer


class FakeImages:
    """Image ids that say what each image was made of."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def suite_base(self, suite, extra_apt=()):
        return ImageRef(f"harness-base:{suite}", f"base-{suite}", "base", "")

    def with_compiler(self, parent, suite_base):
        self.calls.append(("cc", parent.image_id))
        return ImageRef(f"harness-cc:{parent.image_id}", f"cc({parent.image_id})", "cc", "")

    def environment(self, spec, interpreter, lock_text, wheel_dir, services=None, parent=None):
        parent = parent or interpreter.image
        self.calls.append(("env", parent.image_id, lock_text))
        return ImageRef(f"harness-env:{lock_text}", f"env({parent.image_id},{lock_text})", "env", "")


def _environment(compiler: str, lock: str, images: FakeImages):
    prep = Preparer.__new__(Preparer)
    prep.images = images
    interpreter = SimpleNamespace(image=ImageRef("harness-py:3.9", "py", "py", ""), suite="bullseye")
    spec = SimpleNamespace(compiler=compiler, apt_packages=())
    return prep._environment_images(spec, interpreter, SimpleNamespace(lock_text=lock, wheel_dir=None), [])


def test_keep_builds_each_environment_on_the_interpreter_with_the_compiler():
    images = FakeImages()
    first, first_cc = _environment("keep", "lock-a", images)
    second, second_cc = _environment("keep", "lock-b", images)
    assert first.image_id == "env(cc(py),lock-a)" and first_cc is first
    assert second.image_id == "env(cc(py),lock-b)" and second_cc is second
    # the compiler is asked for on the interpreter only (the cached build makes it once)
    assert {call[1] for call in images.calls if call[0] == "cc"} == {"py"}


@pytest.mark.parametrize("compiler", ["build", "none"])
def test_a_test_image_without_the_compiler_has_an_environment_without_it(compiler):
    images = FakeImages()
    env, with_cc = _environment(compiler, "lock-a", images)
    assert env.image_id == "env(py,lock-a)"
    if compiler == "build":
        assert with_cc.image_id == "cc(env(py,lock-a))"
    else:
        assert with_cc is None


def test_image_builds_compile_without_debug_information_after_the_specs_own_flags():
    from harness.engine.instance_layer import CCACHE_ENV, build_env
    plain = build_env(SimpleNamespace(env=()))
    assert plain["CFLAGS"] == plain["CXXFLAGS"] == "-g0"
    assert {k: plain[k] for k in CCACHE_ENV} == CCACHE_ENV
    own = build_env(SimpleNamespace(env=(("CFLAGS", "-O1 -g"), ("OTHER", "x"))))
    assert own["CFLAGS"] == "-O1 -g -g0" and own["CXXFLAGS"] == "-g0" and "OTHER" not in own
