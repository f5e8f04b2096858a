"""Run reports: an HTML page with plots, and a summary table, from a run directory.

Reads what runs write (nothing else):

- ``metrics.jsonl`` files, one line per training step: of ``kz train coder``
  (``<run>/metrics.jsonl``) and of co-evolution phases
  (``<run>/rounds/<N>/coder/metrics.jsonl``, ``<run>/rounds/<N>/proposer/metrics.jsonl``);
- ``rounds.jsonl``, one line per finished co-evolution round: pool size and validity,
  frontier coverage, held-out metrics;
- ``curve.jsonl``, one line per training point and evaluation set
  (``benchmarks/learning_curve.py``): format-error rate, pass@1, pass@n, Proposer validity.

Writes ``<run>/report/index.html`` with PNG plots (matplotlib, no display needed):
reward and correctness per step, the CA-GRPO gate, pool size and validity, frontier
coverage, held-out metrics per round, the learning curve over training points. Plots whose data a run lacks are left out and the
page says so. Nothing here trains or evaluates.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import attrs


@attrs.frozen
class RunData:
    """What a run directory holds for reporting."""

    run_dir: Path
    steps: tuple[dict[str, Any], ...] = ()
    rounds: tuple[dict[str, Any], ...] = ()
    curve: tuple[dict[str, Any], ...] = ()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut off by a crash: the rest still reports
    return rows


def load_run(run_dir: Path) -> RunData:
    """Steps (phase, round, global index) and rounds of a run directory."""
    run_dir = Path(run_dir)
    steps: list[dict[str, Any]] = []
    sources: list[tuple[str, int | None, Path]] = []
    if (run_dir / "metrics.jsonl").is_file():
        sources.append(("coder", None, run_dir / "metrics.jsonl"))
    for round_dir in sorted((run_dir / "rounds").glob("*"), key=lambda p: int(p.name) if p.name.isdigit() else 1 << 30):
        if not round_dir.name.isdigit():
            continue
        for phase in ("proposer", "coder"):
            path = round_dir / phase / "metrics.jsonl"
            if path.is_file():
                sources.append((phase, int(round_dir.name), path))
    counters = {"coder": 0, "proposer": 0}
    for phase, round_number, path in sources:
        for row in _read_jsonl(path):
            counters[phase] += 1
            steps.append({**row, "phase": phase, "round": round_number, "index": counters[phase]})
    rounds = _read_jsonl(run_dir / "rounds.jsonl") if (run_dir / "rounds.jsonl").is_file() else []
    curve = _read_jsonl(run_dir / "curve.jsonl") if (run_dir / "curve.jsonl").is_file() else []
    return RunData(run_dir=run_dir, steps=tuple(steps), rounds=tuple(rounds), curve=tuple(sorted(curve, key=lambda r: r.get("order", 0))))


#: Evaluation sets of a learning curve, and how the report names them.
CURVE_SETS = {
    "heldout": "held-out split (op families never trained on)",
    "indist": "new draws of the trained op families",
    "kb": "KernelBench level-1 easy list",
    "proposer": "Proposer modules",
}


def _curve_plot(run: RunData, folder: Path, plots: dict[str, Path]) -> None:
    points = list(dict.fromkeys(r["point"] for r in run.curve))
    if not points:
        return
    plt, figure, axes = _figure()
    # One colour per set, one line style per measure (pass@1 or valid solid, pass@n dashed,
    # format errors dotted): a dozen lines stay apart.
    styles = {"pass@1": "-", "valid_rate": "-", "pass@n": "--", "format_error_rate": ":"}
    for index, (name, label) in enumerate(CURVE_SETS.items()):
        rows = {r["point"]: r for r in run.curve if r.get("set") == name}
        if not rows:
            continue
        keys = (("valid_rate", "valid"), ("format_error_rate", "format errors")) if name == "proposer" else (
            ("pass@1", "pass@1"), ("pass@n", "pass@n"), ("format_error_rate", "format errors"))
        for key, what in keys:
            values = [rows[p].get(key) if p in rows else None for p in points]
            n = next((rows[p].get("n") for p in points if p in rows and rows[p].get("n")), None)
            if key == "pass@n" and n == 1:
                continue  # the same line as pass@1
            if any(v is not None for v in values):
                shown = what.replace("@n", f"@{n}") if n else what
                capped = next((rows[p].get("max_size") for p in points if p in rows and rows[p].get("max_size")), None)
                if capped:  # judged at smaller sizes than the problems' own (learning_curve.py --max-size)
                    shown += f" (sizes <= {capped})"
                axes.plot(range(len(points)), [float("nan") if v is None else v for v in values], marker="o", color=f"C{index}", linestyle=styles[key], label=f"{name}: {shown}")
    axes.set_xticks(range(len(points)))
    axes.set_xticklabels(points)
    axes.set_ylim(-0.05, 1.05)
    path = folder / "curve.png"
    title = "Learning curve: what the model writes at each training point"
    _save(plt, figure, axes, path, title, "training point")
    plots[title] = path


def _set_label(row: dict[str, Any]) -> str:
    """A curve row's set as the table names it, with the size cap it was judged at."""
    label = str(CURVE_SETS.get(row.get("set", ""), row.get("set")))
    return f"{label} (sizes <= {row['max_size']})" if row.get("max_size") else label


def curve_table(run: RunData) -> str:
    """The learning curve as an HTML table (one row per point and set)."""
    if not run.curve:
        return ""
    head = "<tr><td>point</td><td>set</td><td>samples</td><td>format errors</td><td>pass@1</td><td>pass@n</td><td>valid</td></tr>"

    def cell(value: Any) -> str:
        return "-" if value is None else f"{100 * value:.1f}%" if isinstance(value, float) else html.escape(str(value))

    body = "".join(
        "<tr>" + "".join(f"<td>{cell(v)}</td>" for v in (r["point"], _set_label(r), r.get("samples"), r.get("format_error_rate"), r.get("pass@1"), r.get("pass@n"), r.get("valid_rate"))) + "</tr>"
        for r in run.curve
    )
    return f"<h2>Learning curve</h2><table>{head}{body}</table>"


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 3.2), dpi=110)
    return plt, figure, axes


#: Series drawn on one plot get these in turn: where values coincide (pass@1 = pass@k = 0)
#: a larger hollow marker stays visible around a smaller filled one.
_STYLES = (
    {"marker": "o", "markersize": 11, "markerfacecolor": "none", "linestyle": "-"},
    {"marker": "s", "markersize": 7, "linestyle": "--"},
    {"marker": "^", "markersize": 5, "linestyle": ":"},
    {"marker": "x", "markersize": 5, "linestyle": "-."},
)


def _plot(axes: Any, xs: list[Any], ys: list[Any], label: str) -> None:
    """One series, styled by how many the axes already hold (see :data:`_STYLES`)."""
    style = dict(_STYLES[len(axes.get_lines()) % len(_STYLES)])
    if len(xs) > 20:  # many steps: smaller markers, the line carries the shape
        style["markersize"] = max(3, style["markersize"] // 2)
    axes.plot(xs, ys, label=label, **style)


def _save(plt: Any, figure: Any, axes: Any, path: Path, title: str, xlabel: str) -> None:
    from matplotlib.ticker import MaxNLocator

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps and rounds are whole numbers
    xs = [x for line in axes.get_lines() for x in line.get_xdata()]
    if xs:  # whole steps or rounds, with room around them (one point: not 0.945 to 1.05)
        low, high = int(min(xs)), int(max(xs))
        axes.set_xlim(low - 0.5, high + 0.5)
        if high - low <= 20:  # few: every one labelled (the integer locator gives 0.1 steps for one point)
            axes.set_xticks(range(low, high + 1))
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.grid(alpha=0.3)
    if len(axes.get_legend_handles_labels()[0]) > 6:  # many lines: the legend beside the plot, not over it
        width, height = figure.get_size_inches()
        figure.set_size_inches(width * 1.45, height)
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    elif axes.get_legend_handles_labels()[0]:
        axes.legend(loc="best", fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for row in rows:
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            xs.append(row["index"])
            ys.append(float(value))
    return xs, ys


def make_plots(run: RunData, folder: Path) -> dict[str, Path]:
    """The plots the run's data allows, by title; written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    plots: dict[str, Path] = {}
    for phase in ("coder", "proposer"):
        rows = [s for s in run.steps if s["phase"] == phase]
        if not rows:
            continue
        plt, figure, axes = _figure()
        for key, label in (("reward", "reward"), ("correct_rate", "correctness rate")):
            xs, ys = _series(rows, key)
            if xs:
                _plot(axes, xs, ys, label)
        values = [y for line in axes.get_lines() for y in line.get_ydata()]
        axes.set_ylim(min([0.0, *values]) - 0.1, max([1.0, *values]) + 0.1)  # rewards from -1 up, rates 0..1
        path = folder / f"{phase}_reward.png"
        _save(plt, figure, axes, path, f"{phase.capitalize()}: reward and correctness per step", "training step")
        plots[f"{phase.capitalize()}: reward and correctness per step"] = path
    coder_speed = [s for s in run.steps if s["phase"] == "coder" and s.get("speedup_geomean")]
    if coder_speed:
        plt, figure, axes = _figure()
        _plot(axes, *_series(coder_speed, "speedup_geomean"), "speedup of the correct (geometric mean)")
        _plot(axes, *_series(coder_speed, "fast_1"), "fast_1: correct and faster than the baseline")
        axes.axhline(1.0, color="grey", linewidth=0.8)
        path = folder / "speed.png"
        _save(plt, figure, axes, path, "Coder: speed per step (against reward.speed_baseline)", "training step")
        plots["Coder: speed per step"] = path
    coder = [s for s in run.steps if s["phase"] == "coder" and s.get("groups")]
    if coder:
        plt, figure, axes = _figure()
        xs = [s["index"] for s in coder]
        _plot(axes, xs, [s["gate_open_groups"] / s["groups"] for s in coder], "groups with the gate open")
        signal = [s for s in coder if isinstance(s.get("signal_share"), (int, float))]
        if signal:  # runs from before the field have none
            _plot(axes, [s["index"] for s in signal], [s["signal_share"] for s in signal], "groups with a signal (rewards differ)")
        _plot(axes, xs, [s.get("reward_wait_share") or 0.0 for s in coder], "share of step time waiting for rewards")
        axes.set_ylim(-0.05, 1.05)
        path = folder / "gate.png"
        _save(plt, figure, axes, path, "CA-GRPO gate and reward wait per step", "training step")
        plots["CA-GRPO gate and reward wait per step"] = path
    if run.rounds:
        numbers = [r["round"] for r in run.rounds]
        plt, figure, axes = _figure()
        _plot(axes, numbers, [r.get("pool_size", 0) for r in run.rounds], "modules in the pool")
        _plot(axes, numbers, [r.get("pool_valid", 0) for r in run.rounds], "valid modules")
        axes.set_ylim(-0.5, max([1, *(r.get("pool_size", 0) for r in run.rounds)]) + 0.5)
        path = folder / "pool.png"
        _save(plt, figure, axes, path, "Module pool per round", "round")
        plots["Module pool per round"] = path
        plt, figure, axes = _figure()
        _plot(axes, numbers, [r.get("frontier", {}).get("api_coverage", 0.0) for r in run.rounds], "share of the API catalog in valid modules")
        _plot(axes, numbers, [r.get("frontier", {}).get("intermediate_share", 0.0) for r in run.rounds], "share of modules with 0 < pass rate < 1")
        axes.set_ylim(-0.05, 1.05)
        path = folder / "frontier.png"
        _save(plt, figure, axes, path, "Frontier coverage per round", "round")
        plots["Frontier coverage per round"] = path
        plt, figure, axes = _figure()
        for key, label in (("pass@1", "pass@1"), ("pass@k", "pass@k"), ("fast_1_eager", "fast_1 vs eager"), ("fast_1_compile", "fast_1 vs compile")):
            values = [r.get("heldout", {}).get(key) for r in run.rounds]
            if any(v is not None for v in values):
                _plot(axes, numbers, [v if v is not None else float("nan") for v in values], label)
        axes.set_ylim(-0.05, 1.05)
        path = folder / "heldout.png"
        _save(plt, figure, axes, path, "Held-out evaluation per round", "round")
        plots["Held-out evaluation per round"] = path
    _curve_plot(run, folder, plots)
    return plots


def summary_rows(run: RunData) -> list[tuple[str, str]]:
    """The numbers people compare, as (label, value) rows."""
    rows: list[tuple[str, str]] = [("run directory", str(run.run_dir))]
    for phase in ("coder", "proposer"):
        steps = [s for s in run.steps if s["phase"] == phase]
        if steps:
            last = steps[-1]
            rows.append((f"{phase} steps", str(len(steps))))
            if isinstance(last.get("reward"), (int, float)):
                rows.append((f"{phase} reward (last step)", f"{last['reward']:.3f}"))
            if isinstance(last.get("correct_rate"), (int, float)):
                rows.append((f"{phase} correctness (last step)", f"{last['correct_rate']:.1%}"))
            if isinstance(last.get("speedup_geomean"), (int, float)):
                rows.append((f"{phase} speedup of the correct (last step)", f"{last['speedup_geomean']:.2f}x"))
    if run.rounds:
        last = run.rounds[-1]
        rows.append(("rounds", str(len(run.rounds))))
        rows.append(("pool (valid / all)", f"{last.get('pool_valid', 0)} / {last.get('pool_size', 0)}"))
        for key, value in sorted(last.get("heldout", {}).items()):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                rows.append((f"held-out {key} (last round)", f"{value:.3f}"))
    return rows


#: What a verdict or an invalid reason means, for the explanation of a run.
_MEANING = {
    "format_error": "the reply had no usable code, no fenced python block or no ModelNew",
    "compile_error": "the kernel did not compile",
    "runtime_error": "the kernel raised, crashed or could not run",
    "timeout": "the kernel ran out of time",
    "incorrect": "the kernel ran but its outputs were wrong",
    "rejected": "a guard caught a shortcut, such as torch doing the work or a kernel never launched",
    "format": "no usable module in the reply",
    "does_not_run": "the module did not run",
}


def _counted(counts: dict[str, int]) -> str:
    total = sum(counts.values())
    parts = [f"{n} of {total} {key}" + ("" if key == "correct" else f", {_MEANING.get(key, key)}") for key, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    return "; ".join(parts)


def explain(run: RunData) -> list[str]:
    """What happened in a run and why, in sentences: the verdicts behind the numbers (all
    zeros from a small model are format errors, and say so), with what to do about it."""
    def summed(steps: list[dict[str, Any]], field: str) -> dict[str, int]:
        """The steps' counts under ``field`` (``{"format_error": 2}`` each), added up."""
        total: dict[str, int] = {}
        for step in steps:
            for key, n in (step.get(field) or {}).items():
                total[key] = total.get(key, 0) + int(n)
        return total

    lines: list[str] = []
    coder = [s for s in run.steps if s["phase"] == "coder"]
    verdicts = summed(coder, "verdicts")
    if verdicts:
        lines.append(f"Coder training, {len(coder)} step{'s' if len(coder) != 1 else ''}: {_counted(verdicts)}.")
    proposer = [s for s in run.steps if s["phase"] == "proposer"]
    invalid = summed(proposer, "invalid_by_reason")
    if invalid:
        lines.append(f"Proposer training, {len(proposer)} step{'s' if len(proposer) != 1 else ''}: invalid modules: {_counted(invalid)}.")
    if run.rounds:
        last = run.rounds[-1].get("round")
        results = Path(run.run_dir) / "rounds" / str(last) / "heldout" / "results.jsonl"
        if results.is_file():
            rows = _read_jsonl(results)
            counts: dict[str, int] = {}
            for row in rows:
                counts[row.get("verdict", "?")] = counts.get(row.get("verdict", "?"), 0) + 1
            if counts:
                lines.append(f"Held-out evaluation, round {last}: {_counted(counts)}.")
    steps = coder + proposer
    flat = steps and all(step.get("reward") == steps[0].get("reward") for step in steps) and all(not step.get("loss") for step in steps)
    failed_format = verdicts and verdicts.get("format_error", 0) == sum(verdicts.values())
    if flat:
        lines.append(
            "Every reward was the same, so every advantage was zero and training did not change the models"
            + (": the Coder never wrote a usable code block." if failed_format else ".")
            + " A model this small needs a supervised warm start before RL has anything to learn from:"
            " `kz data synth`, then `kz train sft` and policy.model=<its run>/final (docs/training.md)."
        )
    return lines


def sample_replies(run: RunData, count: int = 2, chars: int = 400) -> list[tuple[str, str]]:
    """A few held-out replies of the last round, (problem, the reply's start), to show what
    the model wrote."""
    if not run.rounds:
        return []
    path = Path(run.run_dir) / "rounds" / str(run.rounds[-1].get("round")) / "heldout" / "samples.jsonl"
    if not path.is_file():
        return []
    return [(row.get("problem", "?"), str(row.get("text", ""))[:chars]) for row in _read_jsonl(path)[:count]]


def write_report(run_dir: Path) -> Path:
    """Write ``<run>/report/index.html`` (and its plots); returns the page's path."""
    run = load_run(run_dir)
    folder = Path(run_dir) / "report"
    plots = make_plots(run, folder)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>kz run report</title>",
        "<style>body{font-family:sans-serif;max-width:900px;margin:2em auto}table{border-collapse:collapse}"
        "td{border:1px solid #ccc;padding:4px 8px}img{max-width:100%;display:block;margin:1em 0}</style></head><body>",
        f"<h1>kz run report</h1><p>{html.escape(str(Path(run_dir).resolve()))}</p>",
        "<table>" + "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in summary_rows(run)) + "</table>",
    ]
    happened = explain(run)
    if happened:
        parts.append("<h2>What happened</h2><ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in happened) + "</ul>")
    replies = sample_replies(run)
    if replies:
        parts.append("<h3>What the model wrote (held-out, last round)</h3>")
        parts += [f"<p><b>{html.escape(problem)}</b></p><pre style='white-space:pre-wrap;background:#f6f6f6;padding:8px'>{html.escape(text)}</pre>" for problem, text in replies]
    parts.append(curve_table(run))
    if not plots:
        parts.append("<p>This run has no training steps or rounds to plot yet.</p>")
    for title, path in plots.items():
        parts.append(f"<h2>{html.escape(title)}</h2><img src='{path.name}' alt='{html.escape(title)}'>")
    missing = [t for t in ("Module pool per round", "Held-out evaluation per round") if t not in plots]
    if missing and run.steps:
        parts.append(f"<p>Not in this run: {html.escape(', '.join(missing))} (co-evolution rounds write them).</p>")
    parts.append("</body></html>")
    page = folder / "index.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return page


#: What a comparison of runs (``kz report RUN RUN ...``) plots per Coder step, one line per run.
COMPARED = (
    ("reward", "reward", "Coder reward per step"),
    ("correct_rate", "correctness rate", "Coder correctness per step"),
    ("speedup_geomean", "speedup of the correct (geometric mean)", "Coder speedup of the correct per step"),
    ("fast_1", "fast_1", "Coder fast_1 per step (correct and faster than the baseline)"),
    ("signal_share", "groups with a signal", "Coder groups whose rewards differ (GRPO learns from these) per step"),
)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def compare_rows(runs: list[RunData]) -> list[dict[str, Any]]:
    """One row per run for a comparison: its Coder steps, the first and last step's
    correctness and speed, and their means over the steps (a run's name is its folder's)."""
    rows = []
    for run in runs:
        steps = [s for s in run.steps if s["phase"] == "coder"]
        row: dict[str, Any] = {"run": Path(run.run_dir).name, "steps": len(steps)}
        for key, _, _ in COMPARED:
            values = [float(s[key]) for s in steps if isinstance(s.get(key), (int, float)) and not isinstance(s.get(key), bool)]
            row[f"{key} first"] = values[0] if values else None
            row[f"{key} last"] = values[-1] if values else None
            row[f"{key} mean"] = _mean(values)
        heldout = run.rounds[-1].get("heldout", {}) if run.rounds else {}
        row["held-out pass@1"] = heldout.get("pass@1")
        rows.append(row)
    return rows


def write_comparison(runs: list[RunData], out: Path) -> Path:
    """Write ``out/index.html``: the runs' Coder steps overlaid (reward, correctness, speed,
    fast_1; a line per run) and a table of each run's first, last and mean values
    (:func:`compare_rows`). Returns the page's path. For ablations: runs that differ in one
    setting, same steps and seed."""
    out.mkdir(parents=True, exist_ok=True)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>kz runs compared</title>",
        "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}table{border-collapse:collapse}"
        "td{border:1px solid #ccc;padding:4px 8px}img{max-width:100%;display:block;margin:1em 0}</style></head><body>",
        "<h1>kz runs compared</h1><ul>" + "".join(f"<li>{html.escape(str(Path(r.run_dir).resolve()))}</li>" for r in runs) + "</ul>",
    ]
    rows = compare_rows(runs)
    columns = list(rows[0]) if rows else []

    def cell(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else html.escape(str(value))

    parts.append("<table><tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in columns) + "</tr>"
                 + "".join("<tr>" + "".join(f"<td>{cell(r[c])}</td>" for c in columns) + "</tr>" for r in rows) + "</table>")
    for key, label, title in COMPARED:
        plt, figure, axes = _figure()
        for run in runs:
            xs, ys = _series([s for s in run.steps if s["phase"] == "coder"], key)
            if xs:
                _plot(axes, xs, ys, f"{Path(run.run_dir).name}: {label}")
        if not axes.get_lines():
            plt.close(figure)
            parts.append(f"<p>{html.escape(title)}: no run recorded it.</p>")
            continue
        path = out / f"compare_{key}.png"
        _save(plt, figure, axes, path, title, "training step")
        parts.append(f"<h2>{html.escape(title)}</h2><img src='{path.name}' alt='{html.escape(title)}'>")
    parts.append("</body></html>")
    page = out / "index.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return page
