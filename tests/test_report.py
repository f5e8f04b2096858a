"""kz report: the HTML page and its plots, checked in a real headless browser."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kz_core.report import load_run, summary_rows, write_report


def write_lines(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def step(i: int, correct: float) -> dict:
    return {
        "step": i, "loss": 0.1, "reward": correct - 0.5, "correct_rate": correct, "gate_open_groups": int(correct > 0.5),
        "groups": 1, "verdicts": {"correct": 1}, "reward_wait_s": 0.5, "reward_wait_share": 0.4, "speed_measured": False,
    }


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    for number in (1, 2):
        write_lines(run / "rounds" / str(number) / "coder" / "metrics.jsonl", [step(i, 0.2 * i * number) for i in (1, 2)])
        write_lines(run / "rounds" / str(number) / "proposer" / "metrics.jsonl", [step(i, 0.3) for i in (1, 2)])
    write_lines(
        run / "rounds.jsonl",
        [
            {"round": n, "pool_size": 4 * n, "pool_valid": 3 * n, "frontier": {"api_coverage": 0.2 * n, "intermediate_share": 0.25},
             "heldout": {"pass@1": 0.1 * n, "pass@k": 0.2 * n, "fast_1_eager": None, "fast_1_compile": None}}
            for n in (1, 2)
        ],
    )
    (run / "metrics.jsonl").write_text(json.dumps(step(1, 0.5)) + "\n{cut off by a cra")
    return run


def test_load_run_orders_steps_by_phase_and_round(run_dir):
    run = load_run(run_dir)
    coder = [s for s in run.steps if s["phase"] == "coder"]
    assert [s["index"] for s in coder] == [1, 2, 3, 4, 5] and [s["round"] for s in coder] == [None, 1, 1, 2, 2]
    assert len(run.rounds) == 2
    assert ("pool (valid / all)", "6 / 8") in summary_rows(run)


def test_report_page_links_every_plot(run_dir):
    page = write_report(run_dir)
    text = page.read_text()
    for name in ("coder_reward.png", "proposer_reward.png", "gate.png", "pool.png", "frontier.png", "heldout.png"):
        assert f"src='{name}'" in text and (page.parent / name).stat().st_size > 5000


def test_an_empty_run_says_so(tmp_path):
    page = write_report(tmp_path)
    assert "no training steps or rounds" in page.read_text()


def test_a_learning_curve_is_plotted_and_tabled(tmp_path):
    rows = [
        {"point": point, "order": order, "set": name, "samples": 16, "format_error_rate": 1.0 - 0.3 * order, "pass@1": 0.1 * order, "pass@n": 0.2 * order, "n": 8}
        for order, point in enumerate(("base", "sft", "grpo"))
        for name in ("heldout", "kb")
    ] + [{"point": "base", "order": 0, "set": "proposer", "samples": 8, "format_error_rate": 0.9, "valid_rate": 0.05}]
    for row in rows:
        if row["set"] == "kb":
            row["max_size"] = 256  # judged at capped sizes (learning_curve.py --max-size): the table says so
    write_lines(tmp_path / "curve.jsonl", rows)
    run = load_run(tmp_path)
    assert [r["point"] for r in run.curve][:2] == ["base", "base"] and len(run.curve) == 7
    page = write_report(tmp_path).read_text()
    assert "src='curve.png'" in page and (tmp_path / "report" / "curve.png").stat().st_size > 5000
    assert "<h2>Learning curve</h2>" in page and "KernelBench level-1 easy list (sizes &lt;= 256)" in page and "70.0%" in page


def test_kz_report_command(run_dir):
    completed = subprocess.run([sys.executable, "-m", "kz_core.cli", "report", str(run_dir)], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    assert "pool (valid / all)" in completed.stdout and "report/index.html" in completed.stderr


BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium installed (Debian: apt-get install chromium)")
def test_the_page_renders_with_its_plots_in_a_headless_browser(run_dir, tmp_path):
    page = write_report(run_dir)
    profile = tmp_path / "profile"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--no-first-run", f"--user-data-dir={profile}"]
    # The browser's own view of the page: every image decoded with a real size.
    probe = page.parent / "probe.html"
    probe.write_text(
        page.read_text().replace(
            "</body>",
            "<script>window.onload=()=>{const imgs=[...document.images];"
            "document.title=imgs.length+':'+imgs.filter(i=>i.complete&&i.naturalWidth>100).length;}</script></body>",
        )
    )
    dom = subprocess.run([BROWSER, *flags, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    assert "<title>6:6</title>" in dom.stdout, dom.stdout[:500] + dom.stderr[-500:]
    shot = tmp_path / "page.png"
    subprocess.run([BROWSER, *flags, f"--screenshot={shot}", "--window-size=1000,3000", page.as_uri()], capture_output=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 20000


def test_a_run_of_format_errors_explains_itself(tmp_path):
    """The zeros of a small model's one-round run, said in words: every sample a format
    error, every reward the same, so nothing was learned, and what to do about it."""
    from kz_core.report import explain

    run = tmp_path / "run"
    flat = {"step": 1, "loss": 0.0, "reward": -1.0, "correct_rate": 0.0, "gate_open_groups": 0, "groups": 1, "verdicts": {"format_error": 8}}
    write_lines(run / "rounds" / "1" / "coder" / "metrics.jsonl", [flat])
    write_lines(run / "rounds" / "1" / "proposer" / "metrics.jsonl", [{"step": 1, "loss": 0.0, "reward": -1.0, "invalid_by_reason": {"format": 2}}])
    write_lines(run / "rounds.jsonl", [{"round": 1, "pool_size": 2, "pool_valid": 0, "heldout": {"pass@1": 0.0, "pass@k": 0.0}}])
    write_lines(run / "rounds" / "1" / "heldout" / "results.jsonl", [{"problem": "p", "verdict": "format_error"}] * 3 + [{"problem": "p", "verdict": "incorrect"}])
    write_lines(run / "rounds" / "1" / "heldout" / "samples.jsonl", [{"problem": "p", "text": "I would write a <kernel> here."}])
    lines = explain(load_run(run))
    assert lines[0].startswith("Coder training, 1 step: 8 of 8 format_error, the reply had no usable code")
    assert "2 of 2 format" in lines[1] and "3 of 4 format_error" in lines[2] and "1 of 4 incorrect" in lines[2]
    assert "did not change the models: the Coder never wrote a usable code block" in lines[3] and "kz train sft" in lines[3]
    page = write_report(run).read_text()
    assert "<h2>What happened</h2>" in page and "I would write a &lt;kernel&gt; here." in page
    completed = subprocess.run([sys.executable, "-m", "kz_core.cli", "report", str(run)], capture_output=True, text=True)
    assert "8 of 8 format_error" in completed.stdout
    as_json = subprocess.run([sys.executable, "-m", "kz_core.cli", "report", str(run), "--json"], capture_output=True, text=True)
    parsed = json.loads(as_json.stdout)
    assert parsed["what_happened"] == lines and parsed["summary"]["rounds"] == "1" and parsed["report"].endswith("index.html")


def test_a_run_that_learns_is_not_called_flat(run_dir):
    from kz_core.report import explain

    assert not any("did not change" in line for line in explain(load_run(run_dir)))


def test_runs_compared_side_by_side(tmp_path):
    """kz report RUN_A RUN_B: each run's page, and a comparison page whose table holds
    each run's first and last correctness and speed (what an ablation reads) and whose
    plots overlay the runs, a line per run."""
    arms = {"cagrpo": (0.5, 0.75, 1.1, 1.4), "correctness_only": (0.5, 0.875, 1.1, 1.0)}
    for name, (first, last, fast_first, fast_last) in arms.items():
        rows = [step(1, first), step(2, last)]
        rows[0].update(speedup_geomean=fast_first, fast_1=0.25, speed_measured=True, signal_share=0.5)
        rows[1].update(speedup_geomean=fast_last, fast_1=0.5, speed_measured=True, signal_share=1.0 if name == "cagrpo" else 0.0)
        write_lines(tmp_path / name / "metrics.jsonl", rows)
    completed = subprocess.run(
        [sys.executable, "-m", "kz_core.cli", "report", str(tmp_path / "cagrpo"), str(tmp_path / "correctness_only"), "--json"],
        capture_output=True, text=True,
    )
    assert completed.returncode == 0, completed.stderr
    reply = json.loads(completed.stdout)
    by_run = {row["run"]: row for row in reply["runs"]}
    assert by_run["cagrpo"]["correct_rate last"] == 0.75 and by_run["correctness_only"]["correct_rate last"] == 0.875
    assert by_run["cagrpo"]["speedup_geomean last"] == 1.4 and by_run["correctness_only"]["speedup_geomean mean"] == pytest.approx(1.05)
    assert by_run["cagrpo"]["signal_share mean"] == 0.75 and by_run["correctness_only"]["signal_share last"] == 0.0
    page = Path(reply["report"])
    assert page == tmp_path / "compare" / "index.html"
    text = page.read_text()
    for key in ("reward", "correct_rate", "speedup_geomean", "fast_1", "signal_share"):
        assert f"compare_{key}.png" in text and (page.parent / f"compare_{key}.png").stat().st_size > 0
    assert (tmp_path / "cagrpo" / "report" / "speed.png").is_file()
    assert "speedup of the correct (last step)" in json.dumps(summary_rows(load_run(tmp_path / "cagrpo")))
