"""Shared helpers for the benchmark scripts (not part of the harness package).

Every script drives the real CLI (``python -m harness.cli run ...``) in a subprocess, so
what is measured is what a user runs. Peak memory of that process comes from
``os.wait4`` (``ru_maxrss`` of the child) and from sampling ``/proc/<pid>/status``.

Figures are meant to be compared *within one run* (ratios, interleaved repetitions): the
machine is shared and noisy, so a lone absolute time means little.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEMO_DIR = PROJECT_ROOT / "instances" / "demo"
RESULTS_DIR = Path(__file__).resolve().parent / "results"
DEFAULT_CACHE = Path.home() / ".cache" / "harness-bench"
DEMO_IDS = ("harness-demo__calcly-1", "harness-demo__calcly-2", "harness-demo__textkit-1",
            "harness-demo__inventory-1")


# ----------------------------------------------------------------------------- machine

def _run_text(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable ({exc})"


def machine_info() -> dict:
    """What the doc must state next to every figure: nproc, free -g, docker version, date."""
    git_head = _run_text(["git", "-C", str(PROJECT_ROOT), "rev-parse", "--short", "HEAD"])
    dirty = _run_text(["git", "-C", str(PROJECT_ROOT), "status", "--porcelain", "--", "harness"])
    return {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "nproc": _run_text(["nproc"]),
        "free_g": _run_text(["free", "-g"]),
        "docker_version": _run_text(["docker", "version", "--format",
                                     "client {{.Client.Version}}, server {{.Server.Version}} "
                                     "(API {{.Server.APIVersion}})"]),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "harness_commit": git_head + (" + uncommitted changes under harness/" if dirty else ""),
        "loadavg_at_start": os.getloadavg(),
        "other_containers_at_start": count_foreign_containers(),
    }


def count_foreign_containers(prefix: str = "") -> int:
    """Running containers not started by this benchmark (a noise indicator: other test
    sessions share the engine)."""
    out = _run_text(["docker", "ps", "-q", "--filter", "status=running"])
    return len([line for line in out.splitlines() if line.strip()])


def command_line() -> str:
    """The exact command that produced a figure, as it would be typed from the project root."""
    exe = sys.executable
    try:
        exe = os.path.relpath(exe, PROJECT_ROOT) if not os.path.relpath(exe, PROJECT_ROOT).startswith("..") else exe
    except ValueError:
        pass
    script = os.path.relpath(os.path.abspath(sys.argv[0]), PROJECT_ROOT)
    return " ".join(shlex.quote(a) for a in [exe, script, *sys.argv[1:]])


# ----------------------------------------------------------------------------- running the CLI

@dataclass
class Sample:
    t: float            # seconds since start
    rss_kb: int         # VmRSS
    hwm_kb: int         # VmHWM (peak so far)
    threads: int
    fds: int
    done: int | None = None  # report.json files written so far (when counted)
    busy_jiffies: int = 0    # machine-wide, cumulative (/proc/stat): busy share of a segment = Δbusy / Δtotal
    total_jiffies: int = 0


@dataclass
class CliRun:
    argv: list[str]
    returncode: int
    elapsed: float
    maxrss_kb: int                      # ru_maxrss from wait4 (the CLI process and its reaped children)
    samples: list[Sample] = field(default_factory=list)
    started_at: float = 0.0             # time.time() at start
    stdout: str = ""
    stderr: str = ""
    cpu_seconds: float = 0.0            # user + system CPU of the CLI process (host side only; not containers)
    system_busy: float = 0.0            # fraction of all CPUs busy machine-wide during the run (noise indicator)
    daemon_cpu_seconds: float = 0.0     # CPU used by dockerd + containerd during the run
    machine_cpu_seconds: float = 0.0    # CPU used by everything on the machine during the run

    @property
    def peak_hwm_kb(self) -> int:
        return max((s.hwm_kb for s in self.samples), default=0)


def _proc_status(pid: int) -> tuple[int, int, int] | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "Threads"):
            values[key] = int(rest.split()[0])
    if "VmRSS" not in values:  # zombie
        return None
    return values["VmRSS"], values.get("VmHWM", 0), values.get("Threads", 0)


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


ENGINE_DAEMONS = ("dockerd", "containerd")


def daemon_cpu_seconds(names: tuple[str, ...] = ENGINE_DAEMONS) -> float:
    """CPU seconds (user + system) used so far by the long-lived engine daemons. The
    short-lived containerd-shim and runc processes are not included."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if Path(entry.path, "comm").read_text().strip() not in names:
                continue
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return total / tick


def count_reports(run_dir: Path) -> int:
    n = 0
    try:
        with os.scandir(run_dir) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and os.path.exists(os.path.join(entry.path, "report.json")):
                    n += 1
    except FileNotFoundError:
        return 0
    return n


def run_cli(args: list[str], *, sample_every: float = 0.0, count_dir: Path | None = None,
            log_dir: Path | None = None, timeout: float | None = None,
            on_sample: Callable[[Sample], None] | None = None, checkout: Path | None = None) -> CliRun:
    """Run ``harness run ARGS --quiet`` in a subprocess; optionally sample its memory
    (and the number of finished instances under ``count_dir``) every ``sample_every`` s.
    ``checkout``: run another checkout's harness (its directory first on PYTHONPATH, its own
    specs and demo set through HARNESS_DATA_DIR: this checkout's specs may use newer fields)."""
    argv = [sys.executable, "-m", "harness.cli", "run", *args, "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(checkout), HARNESS_DATA_DIR=str(checkout)) if checkout else None
    tmp = Path(tempfile.mkdtemp(prefix="bench-cli-", dir=log_dir))
    out_path, err_path = tmp / "stdout.txt", tmp / "stderr.txt"
    samples: list[Sample] = []
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        started, started_at = time.monotonic(), time.time()
        busy0, total0 = cpu_times()
        daemons0 = daemon_cpu_seconds()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=checkout or PROJECT_ROOT, env=env)
        stop = threading.Event()

        def sampler() -> None:
            while not stop.is_set():
                status = _proc_status(proc.pid)
                if status is not None:
                    try:
                        fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
                    except OSError:
                        fds = -1
                    s = Sample(round(time.monotonic() - started, 3), status[0], status[1], status[2], fds,
                               count_reports(count_dir) if count_dir is not None else None, *cpu_times())
                    samples.append(s)
                    if on_sample:
                        on_sample(s)
                stop.wait(sample_every)

        thread = None
        if sample_every > 0:
            thread = threading.Thread(target=sampler, daemon=True)
            thread.start()
        deadline = None if timeout is None else started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.monotonic() > deadline:
                proc.kill()
            time.sleep(0.01)
        elapsed = time.monotonic() - started
        busy1, total1 = cpu_times()
        daemons1 = daemon_cpu_seconds()
        proc.returncode = os.waitstatus_to_exitcode(status)
        stop.set()
        if thread:
            thread.join(5)
    run = CliRun(argv, proc.returncode, elapsed, usage.ru_maxrss, samples, started_at,
                 out_path.read_text(errors="replace"), err_path.read_text(errors="replace"),
                 usage.ru_utime + usage.ru_stime, (busy1 - busy0) / max(1, total1 - total0),
                 daemons1 - daemons0, (busy1 - busy0) / os.sysconf("SC_CLK_TCK"))
    shutil.rmtree(tmp, ignore_errors=True)
    return run


def harness_args(*, instances: Path, predictions: str, run_id: str, output_dir: Path, cache_dir: Path,
                 repos_dir: Path | None = None, repos: Iterable[str] = (), specs: Iterable[str] = (),
                 extra: Iterable[str] = ()) -> list[str]:
    args = ["--instances", str(instances), "--predictions", predictions, "--run-id", run_id,
            "--output-dir", str(output_dir), "--cache-dir", str(cache_dir)]
    if repos_dir is not None:
        args += ["--repos-dir", str(repos_dir)]
    for r in repos:
        args += ["--repo", r]
    for s in specs:
        args += ["--specs", str(s)]
    return [*args, *extra]


def read_reports(run_dir: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(Path(run_dir).glob("*/report.json")):
        data = json.loads(path.read_text())
        out[data["instance_id"]] = data
    return out


# ----------------------------------------------------------------------------- instance sets

def demo_records() -> list[dict]:
    return [json.loads(line) for line in (DEMO_DIR / "instances.jsonl").read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, records: Iterable[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def new_file_diff(path: str, text: str) -> str:
    """A git diff creating ``path`` with ``text`` (ending in a newline)."""
    lines = text.splitlines(keepends=True)
    body = "".join("+" + line for line in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}")


def slow_instance(seconds: float, base_id: str = "harness-demo__calcly-1") -> dict:
    """A demo record whose test patch also creates a passing test that sleeps ``seconds``
    (so the test command takes ~seconds + the demo's own ~0.3 s)."""
    record = dict(next(r for r in demo_records() if r["instance_id"] == base_id))
    record["instance_id"] = f"{base_id}-slow{seconds:g}s"
    slow = (f"import time\n\n\ndef test_slow_suite():\n    time.sleep({seconds!r})\n")
    record["test_patch"] = record["test_patch"] + new_file_diff("tests/test_slow_suite.py", slow)
    record["PASS_TO_PASS"] = [*record["PASS_TO_PASS"], "tests/test_slow_suite.py::test_slow_suite"]
    return record


def copies(n: int, prefix: str, records: list[dict] | None = None) -> list[dict]:
    """``n`` records cycling through the demo set, each with a distinct id."""
    base = records or demo_records()
    out = []
    for k in range(n):
        record = dict(base[k % len(base)])
        record["instance_id"] = f"{prefix}-{k:05d}-{record['instance_id']}"
        out.append(record)
    return out


def remove_images(prefix: str) -> int:
    """Remove ``harness-inst:<prefix>...`` images (the benchmark's own, never shared ones)."""
    import docker
    client = docker.from_env(timeout=600)
    removed = 0
    for image in client.images.list(name="harness-inst"):
        for tag in image.tags:
            if tag.startswith(f"harness-inst:{prefix}"):
                try:
                    client.images.remove(tag)
                    removed += 1
                except docker.errors.APIError:
                    pass
    client.close()
    return removed


# ----------------------------------------------------------------------------- numbers and output

def median(values: Iterable[float]) -> float:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def fmt(value: float, digits: int = 2) -> str:
    if value is None or value != value:
        return "–"
    return f"{value:.{digits}f}"


def markdown_table(headers: list[str], rows: list[list]) -> str:
    def numeric(col: int) -> bool:
        cells = [str(r[col]).split(" ")[0].replace(",", "") for r in rows if col < len(r)]
        try:
            [float(c) for c in cells if c not in ("–", "")]
            return bool(cells)
        except ValueError:
            return False

    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---:" if numeric(i) else "---" for i in range(len(headers))) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def write_results(name: str, data: dict, out: Path | None) -> Path:
    """Write the raw JSON atomically (a temporary file renamed over it): a reader, or a run
    stopped while writing, sees the previous version or the new one, never half of one."""
    path = Path(out) if out else RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=1, default=str) + "\n"
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as handle:
        handle.write(text)
    os.replace(handle.name, path)
    return path


def header(title: str, machine: dict) -> str:
    return (f"## {title}\n\ncommand: `{command_line()}`  \n"
            f"machine: nproc {machine['nproc']}; docker {machine['docker_version']}; "
            f"date {machine['date_utc']}; harness {machine['harness_commit']}; "
            f"load avg at start {', '.join(f'{x:.2f}' for x in machine['loadavg_at_start'])}; "
            f"other running containers at start {machine['other_containers_at_start']}\n\n"
            f"```\n{machine['free_g']}\n```\n")
