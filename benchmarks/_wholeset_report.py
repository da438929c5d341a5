"""What ``benchmarks/whole_set.py`` measured, read and put in tables (pure functions of its
JSON, except :func:`engine_images` and :func:`read_run`, which read the engine and a run
directory once at the end of a run).

Time lines: a task's interval is [finish − ``timings.wall``, finish] (finish: its
``report.json``'s mtime, from the run's start); its phases follow each other from its
start in the order the preparer runs them (``image.prepare_seconds``), then the
evaluation. A build of ``image.builds`` starts ``at`` seconds into its task and belongs to
the phase it starts in. *Σ tasks* sums the phases over tasks (a task waiting for another's
build counts its wait); *Σ work* sums the ``own_seconds`` of the builds (each second of
building once); *critical path* is the wall time during which at least one task was in
the phase (resp. at least one build of it ran): the union of the intervals.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path

PHASES = ("export", "interpreter", "wheelhouse", "environment", "instance")
#: the phase of each kind of build (for work done ahead of its task)
KIND_PHASE = {"base": "interpreter", "py": "interpreter", "wheelhouse": "wheelhouse", "sdist": "wheelhouse",
              "tree-metadata": "wheelhouse", "env": "environment", "cc": "environment", "inst": "instance"}
PHASE_NAMES = {"export": "export (git, one commit)", "interpreter": "interpreter (base bootstrap + interpreter layer)",
               "wheelhouse": "resolve and download on the host (wheelhouse, sdist builds, tree metadata)",
               "environment": "environment (venv layer, compiler layer)", "instance": "instance layer",
               "evaluation": "evaluation (container, patches, tests, grading)"}
GB, MB = 1e9, 1e6


# ----------------------------------------------------------------------------- reading

def engine_images(client) -> dict:
    """The harness's images on the engine: each with the bytes of the layers it added
    (a layer belongs to the image with the fewest layers that holds it: the one that made it)."""
    from harness.imagecache.inventory import read_engine
    view = read_engine(client, None, engine_total=True)
    sizes = view.accounting.sizes
    owner: dict[str, str] = {}
    for image in sorted(view.images, key=lambda i: len(i.layers)):
        for layer in image.layers:
            owner.setdefault(layer, image.image_id)
    own: Counter = Counter()
    for layer, image_id in owner.items():
        own[image_id] += sizes.get(layer, 0)
    return {"engine_bytes": view.engine_bytes, "harness_bytes": sum(own.values()),
            "images": [{"tag": i.name, "kind": i.kind, "own": own[i.image_id], "size": i.size(sizes)}
                       for i in view.images]}


def read_run(run_dir: Path, started_at: float) -> list[dict]:
    """The facts of each report.json of a run directory (written by this run or reused)."""
    reused = set()
    outcomes = run_dir / ".outcomes.jsonl"
    if outcomes.exists():
        for line in outcomes.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("reused"):
                reused.add(entry["instance_id"])
    out = []
    for path in sorted(run_dir.glob("*/report.json")):
        report = json.loads(path.read_text())
        timings, image = report.get("timings") or {}, report.get("image") or {}
        wall = float(timings.get("wall") or 0.0)
        prep = float(timings.get("prepare_images") or 0.0)
        out.append({"id": report["instance_id"], "repo": report.get("repo"), "status": report.get("status"),
                    "resolved": report.get("resolved"), "error_reason": report.get("error_reason"),
                    "finish": round(path.stat().st_mtime - started_at, 3), "wall": wall, "prep": prep,
                    "eval": round(wall - prep, 3), "tests": timings.get("tests"),
                    "phases": image.get("prepare_seconds") or {}, "builds": image.get("builds") or [],
                    "tag": image.get("tag"), "env_tag": image.get("env_tag"), "reused": report["instance_id"] in reused})
    return out


def wheel_sharing(root: Path) -> dict:
    """Wheels across the wheelhouses: how many files and bytes, how many distinct (a wheel's
    file name names its project, version and tags: one name, one file on the index), and how
    many bytes are on disk (a wheel hard-linked into several wheelhouses is one file there:
    ``disk_bytes`` counts each inode once)."""
    files = [w for w in root.glob("*/wheels/*.whl")] if root.is_dir() else []
    distinct: dict[str, int] = {}
    inodes: dict[tuple[int, int], int] = {}
    total = 0
    for wheel in files:
        info = wheel.stat()
        total += info.st_size
        distinct[wheel.name] = info.st_size
        inodes[(info.st_dev, info.st_ino)] = info.st_size
    return {"wheelhouses": len({w.parent.parent for w in files}), "files": len(files), "bytes": total,
            "distinct_files": len(distinct), "distinct_bytes": sum(distinct.values()),
            "disk_files": len(inodes), "disk_bytes": sum(inodes.values())}


# ----------------------------------------------------------------------------- time lines

def union_seconds(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def max_overlap(intervals: list[tuple[float, float]]) -> tuple[int, float]:
    """(the most intervals open at once, seconds during which two or more were open)."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    depth = peak = 0
    two, last = 0.0, None
    for t, step in events:
        if last is not None and depth >= 2:
            two += t - last
        depth += step
        peak = max(peak, depth)
        last = t
    return peak, two


def timeline(report: dict) -> tuple[dict[str, tuple[float, float]], list[dict]]:
    """The task's phase intervals and its builds (each with its phase and absolute span),
    on the run's clock."""
    start = report["finish"] - report["wall"]
    spans, t = {}, start
    for phase in PHASES:
        seconds = float(report["phases"].get(phase) or 0.0)
        spans[phase] = (t, t + seconds)
        t += seconds
    spans["evaluation"] = (start + report["prep"], report["finish"])
    builds = []
    for build in report["builds"]:
        a = start + float(build["at"])
        # work done before the task began (``"ahead"``: the run's resolution ahead, or the
        # task's pre-start) lies in none of its phases: its phase is its kind's
        phase = (KIND_PHASE.get(build["kind"], PHASES[-1]) if build.get("ahead")
                 else next((p for p in PHASES if spans[p][0] <= a < spans[p][1]), PHASES[-1]))
        builds.append({**build, "phase": phase, "span": (a, a + float(build["seconds"]))})
    return spans, builds


def phase_table(reports: list[dict]) -> dict[str, dict]:
    fresh = [r for r in reports if not r["reused"]]
    per_phase: dict[str, dict] = {}
    lines = [timeline(r) for r in fresh]
    for phase in (*PHASES, "evaluation"):
        task_spans = [spans[phase] for spans, _ in lines if spans[phase][1] > spans[phase][0]]
        builds = [b for _, bs in lines for b in bs if b["phase"] == phase]
        per_phase[phase] = {
            "tasks_sum": sum(b - a for a, b in task_spans), "critical_path": union_seconds(task_spans),
            "work_sum": sum(float(b["own_seconds"]) for b in builds),
            "work_critical_path": union_seconds([b["span"] for b in builds]),
            "builds": dict(Counter(b["kind"] for b in builds))}
    return per_phase


def concurrency(reports: list[dict]) -> dict:
    builds = [b for r in reports if not r["reused"] for b in timeline(r)[1]]
    top = [b for b in builds if b["kind"] in ("env", "wheelhouse", "base", "py", "inst", "tree-metadata")]
    env = [b["span"] for b in builds if b["kind"] == "env"]
    env_peak, env_two = max_overlap(env)
    prep_peak, prep_two = max_overlap([b["span"] for b in top])
    return {"env_builds": len(env), "env_max_parallel": env_peak, "env_parallel_seconds": env_two,
            "env_build_seconds": sum(b - a for a, b in env), "env_critical_path": union_seconds(env),
            "builds_max_parallel": prep_peak, "builds_parallel_seconds": prep_two,
            "waiting": sum(r["prep"] for r in reports if not r["reused"])
            - sum(float(b["own_seconds"]) for b in builds if not b.get("ahead"))
            - sum(float(r["phases"].get("export") or 0)
                                                                for r in reports if not r["reused"])}


# ----------------------------------------------------------------------------- disk and growth

def peaks(run: dict) -> dict:
    samples = run["samples"]
    engine = max([s["engine"] for s in samples] + [run["engine_final"]])
    sized = [s["sizes"] for s in samples if "sizes" in s] + [run["sizes_final"]]

    def cache_total(sizes: dict) -> int:
        return sum(v for k, v in sizes.items() if k.startswith(("cache/", "host/")))
    return {"engine": engine, "cache": max(cache_total(s) for s in sized),
            "runs": max(s.get("runs", 0) for s in sized)}


def _last_sizes(samples: list[dict], t: float, run: dict) -> dict:
    found = {}
    for s in samples:
        if s["t"] > t:
            break
        if "sizes" in s:
            found = s["sizes"]
    return found or run["sizes_final"]


def growth(run: dict, checkpoints: list[int] | None = None) -> list[dict]:
    reports = sorted((r for r in run["reports"] if not r["reused"]), key=lambda r: r["finish"])
    n = len(reports)
    if not n:
        return []
    marks = checkpoints or sorted({k for k in (10, 20, 40, 60, 80, 100, 120, 138, 160, 198) if k <= n} | {n})
    builds = sorted((b for r in reports for b in timeline(r)[1]), key=lambda b: b["span"][1])
    rows, previous = [], (0, 0.0)
    for k in marks:
        t = reports[k - 1]["finish"]
        sample = next((s for s in reversed(run["samples"]) if s["t"] <= t), None) or {"engine": 0}
        done = [b for b in builds if b["span"][1] <= t]
        sizes = _last_sizes(run["samples"], t, run)
        rows.append({"done": k, "elapsed": t, "engine": sample["engine"],
                     "cache": sum(v for key, v in sizes.items() if key.startswith(("cache/", "host/"))),
                     "env_builds": sum(1 for b in done if b["kind"] == "env"),
                     "inst_builds": sum(1 for b in done if b["kind"] == "inst"),
                     "segment_per_instance": (t - previous[1]) / (k - previous[0])})
        previous = (k, t)
    return rows


def per_group(run: dict, versions: dict, by: str) -> list[dict]:
    """Cost per repository (``by="repo"``) or per repository and version."""
    own = {i["tag"]: i["own"] for i in run["images"]["images"]}
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in run["reports"]:
        repo, version = versions.get(r["id"], [r["repo"], "?"])
        groups[(repo,) if by == "repo" else (repo, version)].append(r)
    rows = []
    for key, members in sorted(groups.items()):
        work: Counter = Counter()
        for r in members:
            for b in timeline(r)[1]:
                work[b["phase"]] += float(b["own_seconds"])
        builders = [r for r in members if any(b["kind"] == "env" for b in r["builds"])]
        others = [r for r in members if r not in builders]
        envs = {r["env_tag"] for r in members if r["env_tag"]}
        rows.append({"group": " ".join(key), "instances": len(members), "environments": len(envs),
                     "env_built_by": len(builders), "work": dict(work),
                     "first_prep": statistics.median(r["prep"] for r in builders) if builders else None,
                     "later_prep": statistics.median(r["prep"] for r in others) if others else None,
                     "eval_median": statistics.median(r["eval"] for r in members),
                     "env_bytes": sum(own.get(t, 0) for t in envs),
                     "inst_bytes": sum(own.get(t, 0) for t in {r["tag"] for r in members if r["tag"]})})
    return rows


# ----------------------------------------------------------------------------- tables

def _s(v, digits=0) -> str:
    return "–" if v is None or v != v else f"{v:,.{digits}f}"


def _gb(v) -> str:
    return "–" if v is None else f"{v / GB:.2f}"


def _table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def run_row(name: str, run: dict) -> list:
    reports = run["reports"]
    statuses = Counter(r["status"] for r in reports)
    cpu = run["cpu"]
    built = sum(1 for r in reports if not r["reused"] for b in r["builds"] if b["kind"] in IMAGE_KINDS)
    loads = run["load_during"] or [float("nan")]
    p = peaks(run)
    fresh = [r for r in reports if not r["reused"]]
    return [name, _s(run["wall"]), f"{len(reports)}: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())),
            _s(sum(r["prep"] for r in fresh), 1), _s(sum(r["eval"] for r in fresh)), built, sum(r["reused"] for r in reports),
            _s(cpu["harness"]["user"] + cpu["harness"]["system"]), _s(cpu["daemon"]["user"] + cpu["daemon"]["system"]),
            _s(cpu["containers"]["user"] + cpu["containers"]["system"]),
            f"{_gb(p['engine'])} / {_gb(run['engine_final'])}", f"{_gb(p['cache'])}",
            _gb(run["sizes_final"].get("this run", 0)),
            f"{statistics.median(loads):.1f} / {max(loads):.1f}"]


IMAGE_KINDS = ("base", "py", "cc", "env", "inst")
RUN_HEADERS = ["run", "wall (s)", "reports: statuses", "Σ preparation (s)", "Σ evaluation (s)",
               "layers built", "results reused", "harness CPU (s)",
               "engine daemons CPU (s)", "containers CPU (s)", "engine disk peak / final (GB)",
               "cache peak (GB)", "run dir (GB)", "load 1-min median / max"]


def phase_rows(run: dict) -> list[list]:
    table = phase_table(run["reports"])
    rows = []
    for phase, row in table.items():
        rows.append([PHASE_NAMES[phase], _s(row["tasks_sum"]), _s(row["work_sum"]), _s(row["critical_path"]),
                     _s(row["work_critical_path"]), ", ".join(f"{k} {v}" for k, v in sorted(row["builds"].items())) or "–"])
    return rows


PHASE_HEADERS = ["phase", "Σ tasks (s)", "Σ work (s)", "critical path, tasks (s)", "critical path, builds (s)",
                 "builds"]


def markdown(data: dict) -> str:
    m = data["machine"]
    out = [f"command: `{data['command']}`  ",
           f"harness commit {m['harness_commit']}; {m['nproc']} cores ({m['cpu_model']}), {m['memory_gib']} GiB; "
           f"disk: `{m['disk']['df'].splitlines()[-1]}`; kernel {m['kernel']}; date {m['date_utc']}; load average at "
           f"start {', '.join(f'{x:.2f}' for x in m['loadavg_at_start'])}, at the end "
           f"{', '.join(f'{x:.2f}' for x in m.get('loadavg_at_end', []))}",
           f"set: {data['selection']['set']}, {data['selection']['chosen']} of the {data['selection']['held_here']} "
           f"held here ({data['selection']['how']}); --max-workers {data['max_workers']}", ""]
    for side in data["sides"]:
        runs = side["runs"]
        out += [f"### {side['label']} ({side['commit'][:7]}), private engine {side.get('engine_version', '?')}", "",
                _table(RUN_HEADERS, [run_row(n, r) for n, r in runs.items()]), ""]
        if "changed" in runs:
            out += [f"*changed*: {side['changed_config']}.", ""]
        for name, run in runs.items():
            if run["stopped"]:
                out += [f"**{name} stopped**: {run['stopped']}", ""]
            elif not run.get("final", True):
                out += [f"**{name} still running** when these figures were written ({len(run['reports'])} "
                        f"reports after {_s(run['wall'])} s): a snapshot, not the run's totals.", ""]
        for name, run in runs.items():
            if run.get("acct"):
                out += [f"#### CPU by program, {name} run (process accounting)", "", acct_table(run), ""]
        if side.get("engine_version") is None:
            out += ["The private engine never answered: nothing was measured on this side.", ""]
        if "cold" in runs:
            cold = runs["cold"]
            c = concurrency(cold["reports"])
            out += ["#### Cold run by phase", "", _table(PHASE_HEADERS, phase_rows(cold)), "",
                    f"Environment builds: {c['env_builds']} taking {_s(c['env_build_seconds'])} s in all, "
                    f"{_s(c['env_critical_path'])} s of wall time; at most {c['env_max_parallel']} at once, two or "
                    f"more during {_s(c['env_parallel_seconds'])} s. Any layer or wheelhouse build: at most "
                    f"{c['builds_max_parallel']} at once, two or more during {_s(c['builds_parallel_seconds'])} s. "
                    f"Tasks' preparation time not spent building or exporting (waiting on another task's build, "
                    f"look-ups): {_s(c['waiting'])} s.", "",
                    "#### Disk at the end of the cold run", "", disk_table(cold), "", wheel_line(cold.get("wheels") or {}), "",
                    "#### Growth with the set (cold run, instances in the order they finished)", "",
                    _table(["done", "elapsed (s)", "s / instance (segment)", "environments built", "instance layers built",
                            "engine disk (GB)", "cache (GB)"],
                           [[g["done"], _s(g["elapsed"]), _s(g["segment_per_instance"], 1), g["env_builds"],
                             g["inst_builds"], _gb(g["engine"]), _gb(g["cache"])] for g in growth(cold)]), "",
                    "#### Cost per repository and version (cold run)", "",
                    group_table(per_group(cold, data["versions"], "repo")), "",
                    group_table(per_group(cold, data["versions"], "version")), ""]
    if data.get("stopped_by"):
        out += [f"**The benchmark was stopped** ({data['stopped_by']}): the figures above are what it had "
                "measured by then.", ""]
    if len(data["sides"]) > 1:
        out += ["### Side by side: cold runs", "",
                _table(["side", *RUN_HEADERS[1:]], [run_row(s["label"], s["runs"]["cold"]) for s in data["sides"]
                                                    if "cold" in s["runs"]]), "",
                _table(["side", "env builds", "at most at once", "≥ 2 at once (s)", "env critical path (s)",
                        "waiting (s)"],
                       [[s["label"], *(lambda c: [c["env_builds"], c["env_max_parallel"], _s(c["env_parallel_seconds"]),
                                                  _s(c["env_critical_path"]), _s(c["waiting"])])(
                           concurrency(s["runs"]["cold"]["reports"]))] for s in data["sides"] if "cold" in s["runs"]]),
                ""]
    return "\n".join(out)


def acct_table(run: dict, rows: int = 25) -> str:
    """benchmarks/_acct.py's figures: CPU seconds by program and user, with the cgroups' total
    beside them (the engine's daemons outlive the run and have no record)."""
    acct = run["acct"]
    groups = sum(v["user"] + v["system"] for v in run["cpu"].values())
    table = _table(["program", "user", "where", "CPU (s)", "share", "processes"],
                   [[p, u, w, _s(s, 1), f"{100 * s / acct['cpu']:.1f} %" if acct["cpu"] else "–", n]
                    for p, u, w, s, n in acct["programs"][:rows]])
    users = ", ".join(f"{u} {_s(s)} s" for u, s in acct["by_user"].items())
    places = ", ".join(f"{w} {_s(s)} s" for w, s in acct.get("by_place", {}).items())
    return (f"{table}\n\n{acct['processes']} processes ended during the run, {_s(acct['cpu'])} CPU-s in all (by user: "
            f"{users}; by place: {places}); the cgroups counted {_s(groups)} CPU-s (the engine's daemons, still "
            f"running at the end, have no record).")


def disk_table(run: dict) -> str:
    kinds: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for image in run["images"]["images"]:
        kinds[image["kind"]][0] += 1
        kinds[image["kind"]][1] += image["own"]
    rows = [[f"images: {k}", n, _gb(b)] for k, (n, b) in sorted(kinds.items(), key=lambda kv: -kv[1][1])]
    rows.append(["images, each layer once (engine's own count)", "", _gb(run["images"]["engine_bytes"])
                 if run["images"].get("engine_bytes") is not None else "– (not read)"])
    rows.append(["engine data root on disk (file system used)", "", _gb(run["engine_final"])])
    rows += [[k, "", _gb(v)] for k, v in sorted(run["sizes_final"].items(), key=lambda kv: -kv[1]) if k != "this run"]
    return _table(["what", "count", "GB"], rows)


def group_table(rows: list[dict]) -> str:
    return _table(["group", "instances", "environments", "Σ work: resolve+download (s)", "Σ work: environment (s)",
                   "Σ work: instance (s)", "prep of the env builder (s)", "prep of the others, median (s)",
                   "evaluation median (s)", "env MB", "instance MB"],
                  [[r["group"], r["instances"], r["environments"], _s(r["work"].get("wheelhouse", 0)),
                    _s(r["work"].get("environment", 0)), _s(r["work"].get("instance", 0)), _s(r["first_prep"]),
                    _s(r["later_prep"], 1), _s(r["eval_median"], 1), _s(r["env_bytes"] / MB),
                    _s(r["inst_bytes"] / MB)] for r in rows])


def wheel_line(w: dict) -> str:
    if not w.get("files"):
        return "No wheelhouse."
    return (f"Wheels: {w['files']} files, {w['bytes'] / MB:,.0f} MB in {w['wheelhouses']} wheelhouses; "
            f"{w['distinct_files']} distinct, {w['distinct_bytes'] / MB:,.0f} MB "
            f"({100 * (1 - w['distinct_bytes'] / w['bytes']):.0f} % of the bytes are a wheel another wheelhouse also holds)"
            + (f"; on disk {w['disk_files']} files, {w['disk_bytes'] / MB:,.0f} MB (hard links counted once)."
               if "disk_bytes" in w else "."))
