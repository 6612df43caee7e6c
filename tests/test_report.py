"""The BENCHMARKS.md summary is generated from benchmarks/results/*.json and must agree with it."""
import json
import shutil

import pytest

from benchmarks import common, report
from benchmarks.common import RESULTS


def test_the_summary_in_benchmarks_md_matches_the_results_files(capsys):
    assert report.main(["--check"]) == 0, capsys.readouterr().err


def test_every_current_row_reads_its_figures_from_its_results_file():
    summary = report.render_summary()
    for row in report.CURRENT:
        data = json.loads((RESULTS / f"{row.results}.json").read_text())
        assert data["machine"]["commit"] in summary
        if isinstance(row, report.CorrelationRow):
            result = report.ResultsReader(RESULTS).get(row.results, row.keys)
            line = next(line for line in summary.splitlines() if f"`{row.checkpoint}`" in line and f"`{row.human_set}`" in line)
            for name in ("pearson", "spearman", "kendall"):
                assert f"{result[name]:.4f}" in line
        else:
            assert f"{data['full']['spearman']['relevance']['rho']:.3f}" in summary


def test_the_files_the_summary_cards_and_runtime_read_are_at_the_top_and_each_experiment_folder_has_its_log():
    """benchmarks/results/ holds what the summary, the cards and the int8 rule read; a run an experiment log reports is
    in results/experiments/<log>/, and no name is filed twice, so a bare name (a recorded command's) finds one file."""
    from storyeval.scoring.int8.runtime import MEASURED_FIDELITY
    from storyeval_training.export import model_card

    read = ({row.results for row in report.CURRENT} | {name for row in report.CURRENT for name in getattr(row, "speed", ())}
            | {row.cross_validated for row in report.CURRENT if getattr(row, "cross_validated", None)}
            | {name for name, _ in report.PAPER_RESULTS.values()} | {*report.GAMING, report.GUARD_CORRELATION, *report.MODERN}
            | {*model_card.GAMING_RESULT_FILES, *model_card.KINDS_RESULT_FILES}
            | {name.removesuffix(".json") for record in MEASURED_FIDELITY.values() for name in (record.results, record.human_results) if name})
    assert [name for name in sorted(read) if not (RESULTS / f"{name}.json").is_file()] == []
    experiments = RESULTS / common.EXPERIMENTS
    assert {p.name for p in experiments.iterdir()} == {p.parent.name for p in experiments.glob("*/*.json")}  # none empty
    assert {p.name for p in experiments.iterdir()} <= set(common.experiment_logs())
    filed = [p.name for p in (*RESULTS.glob("*.json"), *experiments.glob("*/*.json"))]
    assert sorted({name for name in filed if filed.count(name) > 1}) == []


@pytest.fixture
def copies(tmp_path):
    """A copy of BENCHMARKS.md and of the results the summary reads, to break on purpose."""
    results = tmp_path / "results"
    results.mkdir()
    names = ({row.results for row in report.CURRENT} | {name for row in report.CURRENT for name in getattr(row, "speed", ())}
             | {name for name, _ in report.PAPER_RESULTS.values()})
    for name in names | {row.cross_validated for row in report.CURRENT if getattr(row, "cross_validated", None)}:
        shutil.copy(RESULTS / f"{name}.json", results)
    for name in (*report.GAMING, report.GUARD_CORRELATION, *report.MODERN, report.FIRST_CHECKS_FILE):  # the reward and modern-text tables, where measured
        if (RESULTS / f"{name}.json").is_file():
            shutil.copy(RESULTS / f"{name}.json", results)
    benchmarks_md = tmp_path / "BENCHMARKS.md"
    shutil.copy(report.BENCHMARKS_MD, benchmarks_md)
    return benchmarks_md, results


def _args(benchmarks_md, results, *extra):
    return ["--benchmarks-md", str(benchmarks_md), "--results-dir", str(results), *extra]


def test_a_changed_figure_fails_the_check_and_the_report_writes_it(copies, capsys):
    benchmarks_md, results = copies
    path = results / "union_roc_correlation.json"
    data = json.loads(path.read_text())
    data["checkpoints"]["union-roc"]["sets"]["roc"]["spearman"] = 0.5
    path.write_text(json.dumps(data))
    before = benchmarks_md.read_text()
    assert report.main(_args(benchmarks_md, results, "--check")) == 1
    assert "differs" in capsys.readouterr().err
    assert benchmarks_md.read_text() == before  # --check changes nothing

    assert report.main(_args(benchmarks_md, results)) == 0
    after = benchmarks_md.read_text()
    assert "| 0.5000 |" in after and report.main(_args(benchmarks_md, results, "--check")) == 0
    # only the block between the markers changed
    head, tail = before.split(report.BEGIN)[0], before.split(report.END)[1]
    assert after.startswith(head) and after.endswith(tail)


@pytest.mark.parametrize("damage", ["no markers", "twice", "reversed"])
def test_bad_markers_are_a_clear_error_and_change_nothing(copies, damage):
    benchmarks_md, results = copies
    text = benchmarks_md.read_text()
    broken = {"no markers": text.replace(report.BEGIN, ""),
              "twice": text + report.BEGIN + "\n" + report.END,
              "reversed": text.replace(report.BEGIN, "@@").replace(report.END, report.BEGIN).replace("@@", report.END)}[damage]
    benchmarks_md.write_text(broken)
    with pytest.raises(SystemExit, match="summary markers once each"):
        report.main(_args(benchmarks_md, results))
    assert benchmarks_md.read_text() == broken


def test_a_missing_results_file_or_key_is_named(copies):
    benchmarks_md, results = copies
    before = benchmarks_md.read_text()
    (results / "cross_metric.json").unlink()
    with pytest.raises(SystemExit, match="cross_metric.json not found"):
        report.main(_args(benchmarks_md, results))
    row = report.CorrelationRow("union", "union-roc", "union_roc", "union_correlation", "checkpoints/nothing/sets/roc")
    with pytest.raises(SystemExit, match="has no 'checkpoints/nothing/sets/roc'"):
        report.render_summary(RESULTS, current=(row,))
    assert benchmarks_md.read_text() == before


def test_a_missing_benchmarks_md_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        report.main(["--benchmarks-md", str(tmp_path / "nothing.md")])
    assert "not found" in capsys.readouterr().err


def test_a_new_checkpoint_needs_one_entry(copies):
    """e.g. a future union-roc-large: its results file and one CURRENT entry give it a row."""
    _, results = copies
    data = json.loads((results / "union_correlation.json").read_text())
    data["checkpoints"] = {"union-roc-large": data["checkpoints"]["union-wp"]}
    (results / "union_roc_large_correlation.json").write_text(json.dumps(data))
    row = report.CorrelationRow("union", "union-roc-large", "union_wp", "union_roc_large_correlation", "checkpoints/union-roc-large/sets/wp")
    summary = report.render_summary(results, current=(*report.CURRENT, row))
    assert sum("`union-roc-large`" in line for line in summary.splitlines()) == 1



def test_the_modern_text_table_gives_each_configs_worst_kind_per_view_and_measure(tmp_path):
    per_kind = {"cut": {"within": 0.5, "auc": 0.3}, "swap": {"within": 0.7, "auc": 0.6}, "move": {"within": 0.9, "auc": None}}
    view = {"units": 150, "per_kind": per_kind, "held_out_generator": "claude-instant", "length_spearman": 0.12,
            "generators": {"claude-instant": {"worst": {"within": 0.4, "auc": 0.35}}}}
    (tmp_path / "modern.json").write_text(json.dumps({"machine": {"commit": "abc1234"}, "checkpoints": {"union-wp-base": {"views": {"wp": view}}}}))
    lines = report.modern_table(report.ResultsReader(tmp_path), ["modern"])
    assert lines[2] == "| `union-wp-base` | wp (150) | 0.500 (cut) | 0.300 (cut) | 0.400 / 0.350 (claude-instant) | 0.12 |"
    # a config measured view by view, in two files: one row per view
    (tmp_path / "later.json").write_text(json.dumps({"machine": {"commit": "def5678"}, "checkpoints": {"union-wp-base": {"views": {"roc": view}}}}))
    lines = report.modern_table(report.ResultsReader(tmp_path), ["modern", "later"])
    assert [line.split(" | ")[1] for line in lines[2:]] == ["wp (150)", "roc (150)"]


def test_the_first_checks_table_marks_the_defaults_and_names_the_configs_that_meet_the_targets(copies):
    _, results_dir = copies
    results = json.loads((results_dir / "first_checks.json").read_text())
    label = next(iter(results["checkpoints"]))
    for view in results["checkpoints"][label]["views"].values():
        for kind in report.FIRST_CHECK_TARGETS:
            view["per_kind"][kind]["within"] = 1.0
    (results_dir / "first_checks.json").write_text(json.dumps(results))
    reader = report.ResultsReader(results_dir)
    assert report.meeting_first_check_targets(reader)[0] == f"`{label}`"
    rows = report.first_checks_table(reader)
    assert len(rows) == 2 + len(results["checkpoints"]) and "1.00 / 1.00 / 1.00 / 1.00" in rows[2]
    assert sum("(default)" in row for row in rows) == len(report.default_labels() & set(results["checkpoints"]))
