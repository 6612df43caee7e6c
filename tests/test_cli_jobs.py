"""Each command's job is built once from its options (storyeval/cli/jobs.py): defaults read from the registry, never
written into the command line, and the checkpoint resolved once however many steps ask for it."""
import dataclasses

import pytest

from storyeval.checkpoints import registry, resolution
from storyeval.cli import jobs
from storyeval.cli import main as cli


def parsed(*argv):
    return cli.build_parser().parse_args(list(argv))


@pytest.fixture
def union_defaults_to_wp(monkeypatch):
    """The registry with union's default config changed, as a registry change would change it."""
    monkeypatch.setitem(registry.METRICS, "union", dataclasses.replace(registry.METRICS["union"], default="wp"))


def test_every_command_reads_the_default_config_from_the_registry(union_defaults_to_wp):
    assert jobs.score_job(parsed("score", "s.txt")).scoring.config == "wp"
    assert jobs.compare_job(parsed("compare", "a.jsonl", "b.jsonl")).scoring.config == "wp"
    assert jobs.shards_job(parsed("score-shards", "in", "-o", "out")).scoring.config == "wp"
    assert jobs.score_job(parsed("score", "s.txt", "--config", "roc")).scoring.config == "roc"  # given: kept
    suite = jobs.score_job(parsed("score", "s.txt", "--metric", "story_quality")).scoring
    assert suite.config == jobs.DEFAULT_SUITE_CONFIG and suite.batch_size == jobs.SUITE_BATCH_SIZE


def test_a_score_job_holds_the_metrics_own_defaults_and_columns():
    job = jobs.score_job(parsed("score", "pairs.jsonl", "--metric", "continuation_quality", "-o", "-", "--dtype", "float16"))
    assert job.scoring.batch_size == registry.METRICS["continuation_quality"].batch_size and job.output is None
    assert job.columns.fields == ["story", "context"] and job.score_columns == ["score_overall", "score_relevance", "score_interestingness"]
    story = jobs.score_job(parsed("score", "s.txt", "--context-field", "prompt", "--dtype", "int8"))
    assert story.columns.context_column is None and story.scoring.device == "cpu"  # int8 runs on the CPU
    with pytest.raises(jobs.UsageError, match="--config must be"):
        jobs.score_job(parsed("score", "s.txt", "--config", " "))


def test_the_checkpoint_is_resolved_once_however_often_it_is_asked_for(monkeypatch):
    calls = []
    real = resolution.resolve_checkpoint
    monkeypatch.setattr(resolution, "resolve_checkpoint", lambda *args, **kwargs: calls.append(args) or real(*args, **kwargs))
    scoring = jobs.score_job(parsed("score", "s.txt")).scoring
    assert scoring.checkpoint == scoring.checkpoint and calls == [("union", registry.METRICS["union"].default)]
    shards = jobs.shards_job(parsed("score-shards", "in", "-o", "out")).scoring
    assert shards.checkpoint.is_dir() and len(calls) == 2  # once, by the check that built the job


def test_the_demo_job_names_its_metrics():
    assert jobs.demo_job(parsed("demo")).metrics == tuple(registry.METRICS)
    assert jobs.demo_job(parsed("demo", "--metric", "union", "--port", "8000")) == jobs.DemoJob(("union",), "127.0.0.1", 8000)
