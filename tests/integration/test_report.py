"""What is made of finished windows: report.html rendered by a real headless Chromium, the exports, the
comparison's plot, and the decision recomputed from the stored rows.

Every test here only reads the same two windows (``two_windows``), made once for the file: these tests are
about what is done with a finished window, not how a window runs."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from matplotlib import image

from fairwin.errors import ANSWER_IS_NO
from fairwin.files import read_jsonl
from tests.components import missing
from tests.conftest import plan_factory, sim_role
from tests.integration.helpers import fairwin
from tests.integration.pages import CHROMIUM, Resources, rendered_text


@dataclass(frozen=True)
class FinishedWindows:
    plan: Path
    windows: list[Path]  # in the order they ran

    @property
    def archive(self) -> Path:
        return self.plan.parent / "windows" / "control-archive.jsonl"


@pytest.fixture(scope="module")
def two_windows(tmp_path_factory: pytest.TempPathFactory) -> FinishedWindows:
    """Two controlled win2-v1 windows of one plan, two repeats each, sharing an archive: a deciding cell
    (short-b1) and a reported one (a-long, ``decision = false``), two families, two streams a wave.

    Rounds of 4 ms and four streams a repeat: a repeat keeps its client metrics (and every cell its verdict)
    when a busy machine keeps the client off a CPU for a few ms (`make test HOG=1`): with rounds of 2 ms and
    two streams, one 8 ms wait in each of a repeat's 30 ms speculative streams left a cell INCONCLUSIVE."""
    directory = tmp_path_factory.mktemp("two-windows")
    cell = {"families": ["prose", "code"], "max_tokens": 48, "streams_per_wave": 2}
    cells = {"short-b1": {**cell, "prompt_tokens": 64}, "a-long": {**cell, "prompt_tokens": 256, "decision": False}}
    roles = {
        "A": sim_role("--ms-per-round", "4", model="shared"),
        "B": sim_role("--ms-per-round", "4", "--spec-tokens", "4", "--acceptance", "0.8,0.6,0.5,0.4", model="shared"),
    }
    window = {"repeats": 2, "warmup_waves_max": 1, "report_html": True}
    plan = plan_factory(directory)(roles=roles, cells=cells, window=window)
    for _ in range(2):
        done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
        assert done.returncode == 0, done.stderr
    windows = sorted(p for p in (directory / "windows").iterdir() if p.is_dir() and not p.name.startswith("."))
    return FinishedWindows(plan, windows)


@pytest.mark.slow  # in make test; test-fast keeps the quicker cases of the same feature
def test_report_html_is_self_contained_and_chromium_renders_the_verdict_cells_and_rule(
    two_windows: FinishedWindows, tmp_path: Path
) -> None:
    window = two_windows.windows[0]
    page = window / "report.html"  # written by `fairwin run` beside summary.md
    found = Resources()
    found.feed(page.read_text())
    assert [u for u in found.urls if not u.startswith("data:")] == []  # nothing fetched when it is opened
    assert sum(u.startswith("data:image/png;base64,") for u in found.urls) >= 4  # 2 cells, rate, noise
    decision = json.loads((window / "decision.json").read_text())
    if shutil.which(CHROMIUM) is None:
        missing(CHROMIUM, f"{CHROMIUM} is not on the PATH")
    shot = tmp_path / "report.png"
    flags = [CHROMIUM, "--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND"]
    subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    pixels = image.imread(shot)[..., :3]
    assert pixels.std() > 0.05 and (pixels.mean(axis=2) < 0.9).mean() > 0.02  # drawn, not a blank page
    text = rendered_text(page)
    assert f"{decision['verdict']}: the candidate against its control under rule win2-v1" in text
    assert all(cell["cell"] in text for cell in decision["cells"]) and decision["rule_id"] in text


def test_exports_and_the_comparisons_plot(two_windows: FinishedWindows, tmp_path: Path) -> None:
    windows = two_windows.windows
    out = tmp_path / "exports"
    done = fairwin("export", *map(str, windows), "--out", str(out), "--format", "both")
    assert done.returncode == 0, done.stderr
    pooled = [row for w in windows for row in read_jsonl(w / "pooled.jsonl")]
    with (out / "pooled.csv").open() as rows:
        exported = list(csv.DictReader(rows))
    assert len(exported) == len(pooled) == 2 * 3 * 2 * 2  # windows x starts x cells x repeats
    assert [float(r["pooled_rate_tps"]) for r in exported] == pytest.approx([r["pooled_rate_tps"] for r in pooled])
    table = pq.read_table(out / "decisions.parquet").to_pylist()
    cells = ("short-b1", "a-long")
    assert [(r["window_id"], r["cell"]) for r in table] == [(w.name, c) for w in windows for c in cells]
    primary = json.loads((windows[0] / "decision.json").read_text())["cells"][0]["primary"]
    assert table[0]["effect_pct"] == pytest.approx(primary["estimate"]["point_pct"])
    plot = tmp_path / "across.png"
    compared = fairwin("compare", *map(str, windows), "--plot", str(plot))
    assert compared.returncode in (0, ANSWER_IS_NO), compared.stderr
    assert np.asarray(image.imread(plot)).std() > 0.05
    refused = fairwin("export", str(windows[0]), str(windows[0]), "--out", str(out))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "named twice" in refused.stderr


def test_window_decision_recomputes_exactly_and_the_archive_grows(two_windows: FinishedWindows) -> None:
    windows = two_windows.windows
    for window in windows:
        done = fairwin("decide", str(window), "--json")
        assert done.returncode == 0, done.stderr
        printed = json.loads(done.stdout)
        (recomputed,) = printed["decisions"]
        assert printed["notes"] == [f"recomputed: identical to the recorded decision ({recomputed['verdict']})"]
        assert recomputed == json.loads((window / "decision.json").read_text())
        assert [(c["cell"], c["decides"]) for c in recomputed["cells"]] == [("short-b1", True), ("a-long", False)]
    archive = two_windows.archive
    stats = fairwin("archive", "stats", "--archive", str(archive), "--cell", "short-b1", "--json")
    assert stats.returncode == 0, stats.stderr
    (group,) = json.loads(stats.stdout)  # every control start of short-b1 shares one key
    rate = next(r for r in group["noise"] if r["metric"] == "pooled_rate_tps")
    assert (rate["starts"], rate["windows"]) == (4, 2)
    assert rate["launch_cv_pct"] is not None
    audit = fairwin(
        "rules",
        "audit",
        "win2-launch-v1",
        "--noise-from",
        str(archive),
        "--cell",
        "short-b1",
        "--trials",
        "200",
        "--json",
    )
    assert audit.returncode == 0, audit.stderr
    no_change = json.loads(audit.stdout)["no_change"]
    assert no_change["repeat_cv_pct"] == pytest.approx(rate["repeat_cv_pct"])
    assert no_change["launch_cv_pct"] == pytest.approx(rate["launch_cv_pct"])
    # Against the archive as it is now, the first window sees the second one's starts too.
    (now,) = json.loads(fairwin("decide", str(windows[0]), "--archive", str(archive), "--json").stdout)["decisions"]
    assert now["cells"][0]["noise"]["archive"]["starts"] == 4


def test_a_window_told_to_draw_no_report_writes_its_summary_and_fairwin_report_draws_it_later(
    tmp_path: Path,
) -> None:
    plan = plan_factory(tmp_path)(window={"repeats": 1, "warmup_waves_max": 0, "report_html": False})
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
    (window,) = [p for p in (tmp_path / "windows").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert (window / "summary.md").is_file() and not (window / "report.html").exists()
    drawn = fairwin("report", str(window))
    assert (drawn.returncode, drawn.stdout.strip()) == (0, f"report: {window / 'report.html'}")
    assert "<html" in (window / "report.html").read_text()
