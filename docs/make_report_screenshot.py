"""Regenerate the docs' screenshot of `grpo report` on the sample data (docs/images/report.png).

Run from the checkout, with the report extra and Chromium installed:

    python docs/make_report_screenshot.py

It writes the page of ``sample_data/rollouts_vllm.parquet`` (every section but the per-step
ones: the sample has no step column) and photographs its top at 1280 px with headless Chromium.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHOT = ROOT / "docs" / "images" / "report.png"
WIDTH, HEIGHT = 1280, 1500


def main() -> None:
    from grpo_cli import report_file

    browser = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None)
    if browser is None:
        sys.exit("no headless browser: install Chromium (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        os.chdir(ROOT)  # the page names the input as given: sample_data/...
        report_file("sample_data/rollouts_vllm.parquet", output=str(page))
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}"]
        subprocess.run([browser, *flags, f"--screenshot={SHOT}", page.as_uri()], check=True, capture_output=True, timeout=120)
    print(f"wrote {SHOT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
