"""The HTML reports in a real browser (headless Chromium): the page renders (a screenshot that is not blank
and shows the charts' colours) and logs no script error. Skipped, with the reason, without Chromium;
`.ci/run` installs it, so CI runs these."""
import re
import shutil
import subprocess

import numpy as np
import pytest

from phaze import api
from phaze.report.html import write_search_report
from phaze.search.details import search_details
from phaze.report.html_reproduce import reproduce_report_html

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install "
                                                          "chromium); the browser checks need it")
BLUE = (0x00, 0x72, 0xB2)  # Okabe-Ito blue: the header and most bars
ORANGE = (0xE6, 0x9F, 0x00)  # Okabe-Ito orange: the winner / best plan


def chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
           f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def script_errors(stderr: str) -> list[str]:
    """Console messages of the page that are script errors (Chromium logs them as CONSOLE lines)."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln and re.search(r"Uncaught|Error", ln)]


def render(tmp_path, html_path, name: str):
    """(screenshot path, DOM after scripts ran, script errors on the console)."""
    png = tmp_path / f"{name}.png"
    shot = chromium(tmp_path, "--window-size=1280,2400", f"--screenshot={png}", f"file://{html_path}")
    assert png.exists(), shot.stderr[-2000:]
    dom = chromium(tmp_path, "--dump-dom", f"file://{html_path}")
    return png, dom.stdout, script_errors(shot.stderr) + script_errors(dom.stderr)


def count_near(px, rgb, tol=12) -> int:
    return int((np.abs(px - np.array(rgb)) <= tol).all(axis=1).sum())


def assert_rendered(png) -> None:
    Image = pytest.importorskip("PIL.Image")
    px = np.asarray(Image.open(png).convert("RGB").resize((320, 600)), dtype=int).reshape(-1, 3)
    non_white = float((px.sum(axis=1) < 3 * 245).mean())
    assert non_white > 0.05, f"the page looks blank ({non_white:.1%} non-white)"
    assert count_near(px, BLUE) > 200, "no Okabe-Ito blue: the header or the charts did not render"
    assert count_near(px, ORANGE) > 5, "no Okabe-Ito orange: the winner marks did not render"


def check_page(tmp_path, html_path, name):
    png, dom, errors = render(tmp_path, html_path, name)
    assert errors == []
    assert 'data-rendered="1"' in dom and 'data-js-errors="0"' in dom
    assert_rendered(png)
    return png, dom


def test_search_report_renders_without_errors(tiny_search, tmp_path):
    res, rows = tiny_search
    path = write_search_report(res, str(tmp_path / "search.html"), rows, search_details(res.spec, res.best))
    _, dom = check_page(tmp_path, path, "search")
    assert dom.count("<svg") >= 8


def test_plan_report_renders_without_errors(small_plan, tmp_path):
    result, a = small_plan
    path = api.plan_report(result, str(tmp_path / "plan.html"), a["model"], a["accelerator"], a["devices"],
                           a["global_batch"])
    check_page(tmp_path, path, "plan")


def test_reproduce_report_renders_without_errors(tmp_path):
    from test_report_html import REPRO
    path = tmp_path / "repro.html"
    path.write_text(reproduce_report_html(REPRO), encoding="utf-8")
    check_page(tmp_path, path, "repro")


def test_a_script_error_would_be_caught(tiny_search, tmp_path):
    """Negative control: the same page with a throwing script after ours fails both checks."""
    res, rows = tiny_search
    html = open(write_search_report(res, str(tmp_path / "ok.html"), rows, search_details(res.spec, res.best)), encoding="utf-8").read()
    bad = tmp_path / "bad.html"
    bad.write_text(html.replace("</body>", '<script>throw new Error("deliberate")</script></body>'), encoding="utf-8")
    _, dom, errors = render(tmp_path, bad, "bad")
    assert 'data-js-errors="1"' in dom
    assert any("deliberate" in e for e in errors)
