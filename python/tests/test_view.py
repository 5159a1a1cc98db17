"""``advcalc view`` in a real Chromium (Debian's package, driven by Playwright for Python
with ``executable_path``: no browser download), started through ``advcalc.view``.

A user's path through it: overview → a step → a group → a row, by clicking; the token under
the mouse shows the advantage ``advcalc run`` wrote for it; ``follow=True`` shows a step
written while the page is open, without a reload. Each stage is saved as a screenshot
(``ADVCALC_VIEW_SHOTS``, by default ``target/view-screenshots``): the test's artifacts, and
the pictures in docs/view.md (``ADVCALC_VIEW_SHOTS=docs/view scripts/test -k view``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import advcalc
from conftest import DEMO, REPO, cli

CHROMIUM = os.environ.get("ADVCALC_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(os.environ.get("ADVCALC_VIEW_SHOTS", REPO / "target" / "view-screenshots")).absolute()
# as the machine's probe starts it: no sandbox as root, nothing fetched in the background
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"no Chromium at {CHROMIUM}: .ci/run installs Debian's chromium")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield b
        b.close()


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)


def stepped(dir: Path) -> Path:
    """The demo as two steps of 128 rows, each a file of a dataset directory."""
    table = pq.read_table(DEMO)
    out = dir / "steps"
    out.mkdir()
    for k in range(2):
        part = table.slice(128 * k, 128)
        pq.write_table(part, out / f"step={k + 1}.parquet", row_group_size=64)
    return out


def test_overview_step_group_row_by_clicking_and_the_hovered_token_shows_run_s_advantage(
    browser, tmp_path, monkeypatch
):
    # IN named relative to the working directory: the page's header (and the screenshots in
    # docs/view.md) show `steps`, not a temporary directory
    monkeypatch.chdir(tmp_path)
    steps = stepped(tmp_path).relative_to(tmp_path)
    cli("run", "-q", "-e", "grpo", tmp_path / steps, tmp_path / "out")
    # a dataset OUT mirrors IN: read it back in dataset order
    out = pa.concat_tables(
        [pq.read_table(tmp_path / "out" / f"step={k}.parquet") for k in (1, 2)]
    )
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    with advcalc.view(steps, estimators=["grpo", "rloo"]) as v:
        page.goto(v.url)
        page.get_by_test_id("step-row").first.wait_for()
        assert page.get_by_test_id("step-row").count() == 2
        assert "Per step" in page.content()
        shot(page, "overview")

        page.get_by_test_id("step-row").nth(1).click()
        page.get_by_test_id("group-row").first.wait_for()
        uids = pq.read_table(DEMO).column("uid").to_pylist()[128:]
        assert page.get_by_test_id("group-row").count() == len(set(uids))
        # sorting by pass rate and filtering by uid work on the table
        page.get_by_role("columnheader", name="Pass rate").click()
        expect(page.locator("th[aria-sort]")).to_have_text("Pass rate")
        page.get_by_test_id("group-filter").fill("x-no-such-uid")
        expect(page.get_by_test_id("group-row")).to_have_count(0)
        page.get_by_test_id("group-filter").fill("")
        expect(page.get_by_test_id("group-row")).to_have_count(len(set(uids)))
        # the group whose advantages differ the most first
        page.get_by_role("columnheader", name="Adv. spread grpo").click()
        page.get_by_role("columnheader", name="Adv. spread grpo").click()
        expect(page.locator("th[aria-sort=descending]")).to_have_text("Adv. spread grpo")
        shot(page, "step")

        page.get_by_test_id("group-row").first.click()
        page.get_by_test_id("row-link").first.wait_for()
        uid = page.locator("h1").inner_text().split(" ")[1].rstrip(":")
        assert page.get_by_test_id("row-link").count() == uids.count(uid)
        shot(page, "group")

        page.get_by_test_id("row-link").first.click()
        tokens = page.get_by_test_id("tokens")
        tokens.wait_for()
        row = int(page.url.split("#/row/")[1].split("/")[0])
        assert 128 <= row < 256, page.url
        adv = out.column("advantages")[row].as_py()
        mask = out.column("response_mask")[row].as_py()
        # a policy token in the middle of the response, hovered
        t = [i for i, m in enumerate(mask) if m][len([m for m in mask if m]) // 2]
        tokens.locator(f"span.t[data-t='{t}']").hover()
        inspector = page.get_by_test_id("inspector")
        assert page.get_by_test_id("token-title").inner_text() == f"token {t} of {len(mask)}"
        shown = inspector.locator("tr[data-signal='advantage:grpo'] td.v").inner_text()
        assert np.float32(float(shown)) == np.float32(adv[t]), (shown, adv[t])
        # clicking pins the token in the URL: a link to it
        tokens.locator(f"span.t[data-t='{t}']").click()
        assert page.url.endswith(f"#/row/{row}/token/{t}")
        shot(page, "row")

        # the link opens the same token in a fresh page
        other = browser.new_page(viewport={"width": 1280, "height": 860})
        other.goto(page.url)
        other.get_by_test_id("tokens").wait_for()
        assert other.get_by_test_id("token-title").inner_text() == f"token {t} of {len(mask)}"
        other.close()

        # colour by IS weight is not there without rollout correction; rloo's advantage is
        page.get_by_test_id("signal").select_option("advantage:rloo")
        page.get_by_test_id("tokens").wait_for()
        assert page.get_by_test_id("scale").is_visible()
    page.close()


def test_follow_shows_a_step_that_lands_without_a_reload(browser, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table = pq.read_table(DEMO)
    steps = Path("steps")
    steps.mkdir()
    pq.write_table(table.slice(0, 128), steps / "step=1.parquet", row_group_size=64)
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    with advcalc.view(steps, estimators="grpo", follow=True) as v:
        page.goto(v.url)
        page.get_by_test_id("step-row").first.wait_for()
        assert page.get_by_test_id("step-row").count() == 1
        # written beside, renamed into place: as the hook and trainers land a step; its
        # rewards made constant in every group, so the step raises a finding when it lands
        part = table.slice(128, 128)
        flat = pa.array([[0.0] * (len(m) - 1) + [1.0] for m in part.column("response_mask").to_pylist()], pa.list_(pa.float32()))
        part = part.set_column(part.schema.get_field_index("rm_scores"), "rm_scores", flat)
        pq.write_table(part, tmp_path / "step=2.tmp", row_group_size=64)
        os.rename(tmp_path / "step=2.tmp", steps / "step=2.parquet")
        landed = time.monotonic()
        # (the page's policy forbids eval: no wait_for_function; the locator polls)
        expect(page.get_by_test_id("step-row")).to_have_count(2, timeout=5000)
        took = time.monotonic() - landed
        assert took < 2.0, f"the step showed after {took:.2f} s"
        new = page.get_by_test_id("new-step")
        assert new.count() == 1
        # the landed step's findings are flagged on its row
        flagged = page.locator("tr.flagged[data-testid=step-row]")
        assert flagged.count() >= 1
        shot(page, "follow")
    page.close()


def _get(url: str, path: str) -> dict:
    import json
    import urllib.request

    base, token = url.split("/?token=")
    with urllib.request.urlopen(f"{base}{path}?token={token}", timeout=30) as r:
        return json.load(r)


def test_view_of_an_in_memory_table_serves_it_and_stops_cleanly():
    table = pq.read_table(DEMO)
    v = advcalc.view(table, estimators="grpo", height=600)
    try:
        assert v.running
        assert _get(v.url, "/api/overview")["rows"] == table.num_rows
        html = v._repr_html_()
        assert "<iframe" in html and 'height="600"' in html and v.url.replace("&", "&amp;") in html
        assert repr(v).startswith("<advcalc view at http://127.0.0.1:")
        spooled = v._scratch[0]
        assert Path(spooled).exists()
    finally:
        v.stop()
    assert not v.running
    assert not Path(spooled).exists()
    assert "(stopped)" in repr(v)


def test_a_view_that_cannot_start_raises_the_cli_s_error():
    with pytest.raises(advcalc.DataError) as e:
        advcalc.view(REPO / "no-such-dump.parquet", estimators="grpo")
    assert "no-such-dump.parquet" in str(e.value)
    with pytest.raises(advcalc.UsageError) as e:
        advcalc.view(DEMO, estimators="no_such_estimator")
    assert "unknown estimator" in str(e.value)
    with pytest.raises(advcalc.UsageError) as e:
        advcalc.view(DEMO, estimators="grpo", follow=True)
    assert "watches a directory" in str(e.value)
