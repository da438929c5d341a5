#!/usr/bin/env bash
# Set up harness on a fresh Debian machine and leave a Docker engine answering:
#   1. as root, install Debian's docker.io, mmdebstrap, git, python3-venv, docker-registry (tests
#      start local registries), chromium and chromium-driver (browser tests of the HTML report) when absent;
#   2. create .venv and install the harness (with its test extras) into it;
#   3. start dockerd if nothing answers (stale pid files cleared) and wait for it.
# Idempotent: a second run changes nothing and takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v git >/dev/null 2>&1 || need+=(git)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
# The HTML report's tests drive Debian's headless Chromium through its chromedriver.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
# a real local registry for the registry-image interpreter source's tests (started by the tests)
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
if ((${#need[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: these Debian packages are missing and installing them needs root: ${need[*]}" >&2
    exit 2
  fi
  echo "setup: installing ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: Python 3.11 or newer is needed (python3 is $(python3 -V 2>&1))" >&2
  exit 2
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml setup.py | sha256sum | cut -c1-16)
if [ ! -e "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
  touch "$stamp"
fi

.venv/bin/harness doctor --start-engine
