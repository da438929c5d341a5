"""The committed instance image's environment variables are set as Dockerfile ``ENV`` lines
set them (harness.engine.layers.with_variables; pure)."""

from harness.engine.layers import with_variables


def test_a_new_variable_is_appended_and_an_existing_one_keeps_its_place():
    base = ["LANG=C.UTF-8", "PATH=/opt/harness/venv/bin:/usr/bin", "PIP_NO_INDEX=1"]
    assert with_variables(base, {"PYTHONWARNINGS": "ignore::UserWarning"}) == [*base, "PYTHONWARNINGS=ignore::UserWarning"]
    assert with_variables(base, {"PATH": "/x:/usr/bin", "A": "1=2"}) == [
        "LANG=C.UTF-8", "PATH=/x:/usr/bin", "PIP_NO_INDEX=1", "A=1=2"]
    assert with_variables(base, {}) == base and base[1] == "PATH=/opt/harness/venv/bin:/usr/bin"   # not changed in place


def test_a_name_is_matched_whole():
    assert with_variables(["PATHS=1"], {"PATH": "/bin"}) == ["PATHS=1", "PATH=/bin"]
