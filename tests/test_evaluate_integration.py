"""The metrics in evaluate's eval loops: evaluate.combine with contexts, on_invalid="nan", and
num_process/process_id across two CPU processes."""
import math
import multiprocessing
from pathlib import Path

import evaluate
import pytest
from conftest import save_tiny_checkpoint

METRICS = Path(__file__).resolve().parent.parent / "metrics"
CONTINUATIONS = ["He gave the phone back.", "A tiger appeared at the bar."]
CONTEXTS = ["Ken found a phone at the bar.", "Ken found a phone at the bar."]


@pytest.fixture(scope="module")
def union_checkpoint(tiny_checkpoint):
    return tiny_checkpoint


@pytest.fixture(scope="module")
def plot_checkpoint(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("plot-tiny"), metric="plot_coherence", delexicalize=False)


@pytest.fixture(scope="module")
def combined(union_checkpoint, plot_checkpoint):
    return evaluate.combine([
        evaluate.load(str(METRICS / "union"), str(union_checkpoint)),
        evaluate.load(str(METRICS / "plot_coherence"), str(plot_checkpoint)),
        evaluate.load(str(METRICS / "continuation_quality")),
    ])


def test_combine_all_three_with_contexts(combined):
    results = combined.compute(predictions=CONTINUATIONS, contexts=CONTEXTS, batch_size=4, dtype="float32")
    assert len(results["union_scores"]) == len(results["plot_coherence_scores"]) == len(results["overall"]) == 2
    assert {"union_settings", "plot_coherence_settings", "continuation_quality_settings"} <= set(results)
    # the same through add_batch, as in an eval loop
    combined.add_batch(predictions=CONTINUATIONS[:1], contexts=CONTEXTS[:1])
    combined.add_batch(predictions=CONTINUATIONS[1:], contexts=CONTEXTS[1:])
    queued = combined.compute()
    assert queued["union_scores"] == pytest.approx(results["union_scores"], abs=1e-5)
    assert queued["overall"] == pytest.approx(results["overall"], abs=1e-5)
    # and one pair at a time: combine's add passes each module its item under the feature's name (predictions=)
    for continuation, context in zip(CONTINUATIONS, CONTEXTS):
        combined.add(prediction=continuation, contexts=context)
    one_by_one = combined.compute()
    assert one_by_one["union_scores"] == pytest.approx(results["union_scores"], abs=1e-5)
    assert one_by_one["overall"] == pytest.approx(results["overall"], abs=1e-5)


def test_story_metrics_ignore_contexts_but_refuse_misaligned_ones(union_checkpoint):
    union = evaluate.load(str(METRICS / "union"), str(union_checkpoint))
    with_contexts = union.compute(predictions=CONTINUATIONS, contexts=CONTEXTS)
    assert with_contexts["scores"] == union.compute(predictions=CONTINUATIONS)["scores"]
    with pytest.raises(ValueError, match="same length"):
        union.compute(predictions=CONTINUATIONS, contexts=CONTEXTS[:1])
    with pytest.raises(TypeError, match="contexts must be a list"):
        union.compute(predictions=CONTINUATIONS, contexts="Ken found a phone.")


def test_on_invalid_nan_scores_the_rest_and_names_the_rows(union_checkpoint, caplog):
    union = evaluate.load(str(METRICS / "union"), str(union_checkpoint))
    with pytest.raises(ValueError, match=r"predictions\[1\] is empty"):  # the default: one bad row stops the batch
        union.compute(predictions=[CONTINUATIONS[0], "  ", CONTINUATIONS[1]])
    results = union.compute(predictions=[CONTINUATIONS[0], "  ", CONTINUATIONS[1]], on_invalid="nan")
    assert math.isnan(results["scores"][1]) and not math.isnan(results["scores"][0])
    assert results["mean_score"] == pytest.approx((results["scores"][0] + results["scores"][2]) / 2)
    assert "no letters at row 1" in caplog.text
    union.add_batch(predictions=["...", CONTINUATIONS[0]], on_invalid="nan")
    queued = union.compute(on_invalid="nan")
    assert math.isnan(queued["scores"][0]) and queued["scores"][1] == pytest.approx(results["scores"][0], abs=1e-5)
    with pytest.raises(ValueError, match="on_invalid must be one of"):
        union.compute(predictions=CONTINUATIONS, on_invalid="skip")


def test_non_english_and_digit_only_texts_are_refused_or_nan_with_their_reason(union_checkpoint, caplog):
    union = evaluate.load(str(METRICS / "union"), str(union_checkpoint))
    german, digits = "Der alte Mann ging jeden Morgen mit seinem Hund in den Park.", "12345 67890"
    with pytest.raises(ValueError, match=r"predictions\[1\] is not English \(it reads as German"):
        union.compute(predictions=[CONTINUATIONS[0], german])
    with pytest.raises(ValueError, match=r"predictions\[0\] is empty or has no letters"):
        union.compute(predictions=[digits])
    results = union.compute(predictions=[german, CONTINUATIONS[0], digits], on_invalid="nan")
    assert math.isnan(results["scores"][0]) and math.isnan(results["scores"][2]) and not math.isnan(results["scores"][1])
    assert "not English at row 0; no letters at row 2" in caplog.text


def test_continuation_on_invalid_nan_covers_a_bad_context():
    cq = evaluate.load(str(METRICS / "continuation_quality"))
    results = cq.compute(predictions=CONTINUATIONS, contexts=[CONTEXTS[0], ""], on_invalid="nan")
    assert math.isnan(results["overall"][1]) and not math.isnan(results["overall"][0])
    assert results["mean_overall"] == results["overall"][0]


def _rank(rank, world, checkpoint, cache_dir, queue):
    from storyeval.scoring import sequence as scoring

    metric = evaluate.load(str(METRICS / "union"), str(checkpoint), num_process=world, process_id=rank,
                           experiment_id="two-ranks", cache_dir=cache_dir)
    for batch in (CONTINUATIONS[rank::world], CONTEXTS[rank::world]):
        metric.add_batch(predictions=batch)
    result = metric.compute()  # gathers on rank 0; None elsewhere
    queue.put((rank, result, scoring._load_story_classifier.cache_info().misses))


def test_two_processes_gather_on_rank_zero_each_loading_once(union_checkpoint, tmp_path):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    ranks = [context.Process(target=_rank, args=(rank, 2, union_checkpoint, str(tmp_path), queue)) for rank in range(2)]
    for process in ranks:
        process.start()
    reports = dict((rank, (result, loads)) for rank, result, loads in (queue.get(timeout=300) for _ in ranks))
    for process in ranks:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert reports[1][0] is None and reports[0][1] == reports[1][1] == 1
    gathered = reports[0][0]["scores"]
    single = evaluate.load(str(METRICS / "union"), str(union_checkpoint)).compute(
        predictions=CONTINUATIONS[0::2] + CONTEXTS[0::2] + CONTINUATIONS[1::2] + CONTEXTS[1::2])["scores"]
    assert sorted(gathered) == pytest.approx(sorted(single), abs=1e-5) and len(gathered) == 4
