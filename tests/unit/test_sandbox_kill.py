"""DockerSandbox.kill returns only once the engine reports the container stopped.

The engine's kill can return while the container's state still reads "running" (CI saw it
under the full suite's load: a test asserted the container dead right after a kill). The
engine's lag is the fault injected here; the real engine's kill is exercised by the
integration tests (test_step_session, test_isolation)."""

import pytest
from docker.errors import APIError, NotFound

from harness.engine import sandbox as sandbox_module
from harness.engine.sandbox import DockerSandbox
from harness.errors import InfrastructureError


class LaggingContainer:
    """A container whose state reads "running" for ``lag`` reloads after each kill, and which
    ignores the first ``ignored`` kills altogether."""

    id = "f" * 64

    def __init__(self, lag: int, ignored: int = 0, gone: bool = False) -> None:
        self.lag, self.ignored, self.gone = lag, ignored, gone
        self.kills = 0
        self.status = "running"
        self._reloads_left = None

    def kill(self) -> None:
        if self.gone:
            raise NotFound("no such container")
        self.kills += 1
        if self.kills > self.ignored and self._reloads_left is None:
            self._reloads_left = self.lag
        if self.status != "running":
            raise APIError("container is not running")

    def reload(self) -> None:
        if self._reloads_left is not None:
            if self._reloads_left == 0:
                self.status = "exited"
            else:
                self._reloads_left -= 1


def test_kill_waits_until_the_engine_reports_the_container_stopped():
    container = LaggingContainer(lag=5)
    box = DockerSandbox(client=None, container=container, volume_names=[])
    box.kill()
    assert container.status == "exited"
    assert not box.alive()


def test_a_kill_the_engine_ignored_is_sent_again(monkeypatch):
    container = LaggingContainer(lag=0, ignored=2)
    box = DockerSandbox(client=None, container=container, volume_names=[])
    box.kill()
    assert container.kills == 3
    assert container.status == "exited"


def test_a_container_gone_before_the_kill_is_not_an_error():
    box = DockerSandbox(client=None, container=LaggingContainer(lag=0, gone=True), volume_names=[])
    box.kill()


def test_a_container_that_never_stops_is_an_infrastructure_error(monkeypatch):
    monkeypatch.setattr(sandbox_module, "KILL_CONFIRM_SECONDS", 2.5)
    container = LaggingContainer(lag=0, ignored=10 ** 6)
    box = DockerSandbox(client=None, container=container, volume_names=[])
    with pytest.raises(InfrastructureError, match="still runs"):
        box.kill()
    assert container.kills >= 3   # sent again each second
