"""Full-page PNG screenshots of report pages in headless Chromium (for docs/screenshots).

    .venv/bin/python scripts/screenshots.py OUT_DIR NAME=PAGE.html [NAME=PAGE.html ...]

Each PAGE is opened from file://, the window is grown to the page's height (at most
--max-height pixels) and OUT_DIR/NAME.png is written.  A page that logs a console error
is refused (nothing is written for it, the exit code is 1).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.browser.chromium import chromium, console_errors  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("pages", nargs="+", metavar="NAME=PAGE")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--max-height", type=int, default=4000)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    with chromium() as driver:
        for item in args.pages:
            name, _, page = item.partition("=")
            driver.set_window_size(args.width, 1000)
            driver.get(Path(page).resolve().as_uri())
            time.sleep(0.3)
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(args.width, min(height + 20, args.max_height))
            time.sleep(0.2)
            errors = console_errors(driver)
            if errors:
                print(f"{name}: console errors, not written: {errors}", file=sys.stderr)
                failed = 1
                continue
            target = args.out_dir / f"{name}.png"
            driver.save_screenshot(str(target))
            print(f"{target} ({target.stat().st_size // 1024} KiB)")
    return failed


if __name__ == "__main__":
    sys.exit(main())
