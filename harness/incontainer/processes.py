"""Running commands for the trusted steps (imported by ``launcher.py`` from the trusted
directory; root; Python >= 3.6, standard library only): as the test or the service user with
no capability (``setpriv``), in a session of their own killed whole at the deadline, their
output captured where no one else can reach it; and the services the tests talk to, each as
the service user from a directory of its own (:func:`start_services`).
"""

import os
import socket
import subprocess
import tempfile
import time
import signal

TAIL = 4000
DROP = ["/usr/bin/setpriv", "--reuid={uid}", "--regid={gid}", "--clear-groups", "--bounding-set=-all",
        "--inh-caps=-all", "--ambient-caps=-all", "--"]


def as_user(uid, gid, argv):
    return [part.format(uid=uid, gid=gid) for part in DROP] + list(argv)


def env_argv(env, argv):
    return ["/usr/bin/env", "-i"] + ["{}={}".format(k, v) for k, v in sorted(env.items())] + list(argv)


def run_group(argv, cwd, env, timeout, stdout, stderr):
    """Run argv in its own session; kill the whole group at the deadline."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except OSError:
                pass
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
    return {"exit_code": None if timed_out else proc.returncode, "timed_out": timed_out,
            "duration": round(time.monotonic() - started, 4)}


def captured(argv, cwd, env, timeout):
    # an unnamed file (O_EXCL, random name): the test user can write /tmp, and a link planted
    # at a predictable path there would make root write wherever it points
    with tempfile.TemporaryFile() as out:
        result = run_group(argv, cwd, env, timeout, out, subprocess.STDOUT)
        out.seek(0, 2)
        out.seek(max(0, out.tell() - TAIL))
        result["output_tail"] = out.read().decode("utf-8", "replace")
    return result


# --------------------------------------------------------------------------- services
#: what the services' interpreters must not read from a directory the test user can write
SERVICE_ENV = {"PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def service_home(plan, name, user):
    """A service's working directory and HOME: ``<service_dir>/<name>``, owned by the service
    user, inside a root-owned directory on /harness (the test user can write /tmp and the
    working copy: a service started there would import what the tests leave, as ``python -c``
    and gunicorn put the working directory on ``sys.path``, and ``site`` reads HOME's user
    site-packages)."""
    top = plan["service_dir"]
    if not os.path.isdir(top):
        os.mkdir(top, 0o755)
    os.chown(top, 0, 0)
    os.chmod(top, 0o755)
    home = os.path.join(top, name)
    os.mkdir(home, 0o700)
    os.chown(home, user[0], user[1])
    return home


def writable_by_others(path, allowed_uids):
    """The first component of ``path`` (or of its nearest existing ancestor) that a user
    other than root and ``allowed_uids`` could write or replace, or None."""
    path = os.path.abspath(path)
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    while True:
        st = os.lstat(path)
        if st.st_uid not in (0,) + tuple(allowed_uids) or st.st_mode & 0o022:
            return path
        if path == "/":
            return None
        path = os.path.dirname(path)


def service_env(svc, home, user):
    """The service's environment: the spec's, with HOME at its own directory, no user
    site-packages, and refused when a PYTHONPATH entry is writable by anyone else."""
    env = dict(svc["env"], HOME=home, **SERVICE_ENV)
    for entry in env.get("PYTHONPATH", "").split(":"):
        if entry and writable_by_others(entry, (user[0],)):
            raise ValueError("PYTHONPATH entry {} is writable by other users ({})".format(
                entry, writable_by_others(entry, (user[0],))))
    return env


def start_services(plan, record):
    """Set up and start each service; False (with the reason recorded) if one fails. Set-up
    steps run as root with a root-owned HOME; each service as the service user, from
    :func:`service_home`."""
    user = plan["service_user"]
    for svc in plan.get("services", []):
        try:
            home = service_home(plan, svc["name"], user)
            env = service_env(svc, home, user)
        except (OSError, ValueError) as exc:
            record["service_failure"] = "service {}: {}".format(svc["name"], exc)
            return False
        setup_env = dict(plan["base_env"], HOME=plan["service_dir"], **SERVICE_ENV)
        for step in svc.get("setup", []):
            res = captured(env_argv(setup_env, ["/bin/bash", "-c", step]), "/", None, plan["setup_timeout"])
            res.update(phase="service_setup", argv=["/bin/bash", "-c", step])
            record["commands"].append(res)
            if res["exit_code"] != 0:
                record["service_failure"] = "service {}: set-up {!r} failed: {}".format(
                    svc["name"], step, res["output_tail"][-800:])
                return False
        log = os.path.join(home, "service.log")
        with open(log, "wb") as out:
            os.chown(log, user[0], user[1])
            subprocess.Popen(as_user(user[0], user[1], env_argv(env, ["/bin/bash", "-c", svc["command"]])),
                             cwd=home, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        record["commands"].append({"phase": "service_start", "argv": ["/bin/bash", "-c", svc["command"]],
                                   "exit_code": None, "duration": 0.0, "cwd": home})
        started = time.monotonic()
        deadline = started + svc.get("ready_timeout", 60)
        for address in svc.get("ready", []):
            host, port = address.rsplit(":", 1)
            while True:
                try:
                    socket.create_connection((host, int(port)), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        with open(log, "rb") as handle:
                            tail = handle.read()[-3000:].decode("utf-8", "replace")
                        record["service_failure"] = "service {} did not come up: {} not accepting\n{}".format(
                            svc["name"], address, tail)
                        return False
                    time.sleep(0.1)
        if svc.get("ready"):
            record["commands"].append({"phase": "service_ready", "argv": ["connect"] + svc["ready"], "exit_code": 0,
                                       "duration": round(time.monotonic() - started, 4)})
    return True
