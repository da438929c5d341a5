"""Debian's headless Chromium driven through Debian's chromedriver (selenium).

Flags: root needs ``--no-sandbox``; the background-networking, component-update, sync and
QUIC flags keep a headless Chromium from calling out to the (closed) network; every
session gets a fresh ``--user-data-dir``.  Console messages are collected through
chromedriver's ``goog:loggingPrefs``.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1000", "--hide-scrollbars")


def missing() -> str | None:
    """Why the browser cannot run here (None when it can)."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not Path(path).exists():
            return f"{path} is missing: apt-get install {package} (scripts/setup.sh does)"
    return None


@contextmanager
def chromium() -> Iterator["object"]:
    """A selenium WebDriver for headless Chromium; quits and removes its profile on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="harness-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver) -> list[dict]:
    """Console messages of level SEVERE since the last call (errors, CSP violations, 404s)."""
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
