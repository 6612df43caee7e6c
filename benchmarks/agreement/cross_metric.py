"""Each metric on the other metric's human set, so the two can be compared on the same data.

    python -m benchmarks.agreement.cross_metric
    python -m benchmarks.agreement.cross_metric --checkpoint union:union-roc=hub_cards/union-roc \
        --checkpoint plot_coherence:plot-coherence-roc=hub_cards/plot-coherence-roc
    python -m benchmarks.agreement.cross_metric --checkpoint plot_coherence:plot-coherence-wp=<folder> --output wp/plot_coherence_wp_correlation

Sets: UNION's ``union_roc`` (400 stories) and ``union_wp`` (200), scored as the
mean of 7 binary votes, and the plot paper's AMT ROC set (300 stories), scored as
the mean of 5 ratings (0-5). Results go to ``benchmarks/results/cross_metric.json`` (``--output``: another name).
These are test sets: nothing here may be used to choose a checkpoint. With ``--baseline LABEL`` (the checkpoint a
candidate would replace, scored in the same run), each other checkpoint gets, per set, the paired bootstrap 95%
interval of its Spearman less the baseline's, the stories resampled, and whether it falls beyond it: the human sets'
part of the ship rule (a candidate that ships measures them once, after the rest of its rule holds).
``--ending LABEL=STORY_FOLDER+ENDING_FOLDER:WEIGHT`` adds a ``union`` row of a checkpoint's score mixed with an ending
checkpoint's score of each story's last two sentences (:mod:`.ending_mix`); ``--neighbours
LABEL=STORY_FOLDER+NEIGHBOUR_FOLDER:WEIGHT`` one mixed with the mean of a neighbour checkpoint's scores of every two
neighbouring sentences; ``--opening-ending`` one mixed with an ending checkpoint's score of its first sentence and last two;
``--runs`` one mixed with the mean of an order checkpoint's scores of every run of five consecutive sentences;
``--topic`` one mixed with a sentence embedder's mean similarity of every two of the story's distinct sentences.
"""
from __future__ import annotations

import argparse

import numpy as np

from ..common import BUNDLED, command_line, machine, metric_checkpoint_spec, require_checkpoint_folders, results_name, write_results
from ..correlation import HUMAN_SETS, format_row, load_human_set, score_set
from .ending_mix import MIX_READS, add_mix_arguments, load_part_scorer, mix_rows, part_reading, part_sentences, part_shares, share_field

DEFAULT_CHECKPOINTS = [
    ("union", "union-roc", str(BUNDLED / "union-roc")),
    ("plot_coherence", "plot-coherence-roc", str(BUNDLED / "plot-coherence-roc")),
]


def spearman_difference(candidate, baseline, human, confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> dict:
    """Candidate's Spearman with ``human`` less the baseline's, with a paired percentile bootstrap interval (the same
    stories drawn for both); ``falls``: the whole interval lies below 0."""
    from scipy import stats

    def difference(c, b, h):
        return stats.spearmanr(c, h)[0] - stats.spearmanr(b, h)[0]

    data = tuple(np.asarray(x, dtype=float) for x in (candidate, baseline, human))
    result = stats.bootstrap(data, difference, paired=True, vectorized=False, confidence_level=confidence, n_resamples=resamples,
                             method="percentile", random_state=np.random.default_rng(seed))
    low, high = (round(float(v), 4) for v in (result.confidence_interval.low, result.confidence_interval.high))
    return {"difference": round(float(difference(*data)), 4), "interval": [low, high], "falls": high < 0}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", action="append", default=[], type=metric_checkpoint_spec,
                        help="metric:label=folder_or_config (repeatable)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sets", nargs="+", default=list(HUMAN_SETS), choices=HUMAN_SETS, help="human sets to score (default: all)")
    add_mix_arguments(parser)
    parser.add_argument("--baseline", default=None, help="a label: each other checkpoint's Spearman difference from it, "
                        "with its paired bootstrap 95%% interval")
    parser.add_argument("--output", type=results_name, default="cross_metric",
                        help="name of the results file (a new checkpoint's keeps the bundled rows' file)")
    args = parser.parse_args(argv)
    mixes, mix_labels = mix_rows(args)
    checkpoints = args.checkpoint or ([] if mixes else DEFAULT_CHECKPOINTS)
    labels = [label for _, label, _ in checkpoints] + mix_labels
    if len(set(labels)) < len(labels):
        parser.error(f"each row needs its own label: {labels}")
    for label, (kind, story, part, _) in mixes.items():
        require_checkpoint_folders(parser, {label: story, f"{label} ({kind})": part}, f"--{kind}")
    shares = part_shares(parser, args.part_lowest_share, mixes)
    sentences_of = part_sentences(parser, args.part_sentences, mixes)
    if args.baseline and args.baseline not in labels:
        parser.error(f"--baseline {args.baseline}: not one of the labels {sorted(labels)}")

    from storyeval.checkpoints.resolution import resolve_checkpoint
    from storyeval.scoring.ending import mix_scorer
    from storyeval.scoring.sequence import load_scorer
    from storyeval_training.export.provenance import portable_path

    payload = {"machine": machine(), "command": command_line(__name__, argv), "checkpoints": {}}
    human_sets = [load_human_set(name) for name in args.sets]
    scores = {}  # label -> set -> scores, for the baseline's paired intervals
    rows = [(label, metric, resolve_checkpoint(metric, config), None) for metric, label, config in checkpoints]
    rows += [(label, "union", story, (kind, part, weight)) for label, (kind, story, part, weight) in mixes.items()]
    for label, metric, path, mix in rows:
        scorer = load_scorer(metric, path)
        entry = payload["checkpoints"][label] = {"metric": metric, "path": portable_path(str(path)), "sets": {}}
        if mix:
            kind, part_folder, weight = mix
            part = load_part_scorer(kind, part_folder)
            sentences, read = part_reading(kind, sentences_of[label])
            scorer = mix_scorer(MIX_READS[kind], scorer, part, weight, sentences, label, shares[label])
            entry[kind.replace("-", "_")] = {"path": portable_path(str(part_folder)), **read, "weight": weight, **share_field(shares[label])}
        for human_set in human_sets:
            result, scores.setdefault(label, {})[human_set.name] = score_set(scorer, human_set, args.batch_size, keep_scores=True)
            entry["sets"][human_set.name] = result
            print(f"{label} on {human_set.name}: " + format_row(entry["sets"][human_set.name], decimals=3, p_values=False))
    if args.baseline:
        for label, entry in payload["checkpoints"].items():
            if label == args.baseline:
                continue
            entry["spearman_against_baseline"] = {
                human_set.name: spearman_difference(scores[label][human_set.name], scores[args.baseline][human_set.name], human_set.human)
                for human_set in human_sets}
            for name, d in entry["spearman_against_baseline"].items():
                print(f"{label} - {args.baseline} on {name}: Spearman {d['difference']:+.4f}, 95% paired interval "
                      f"[{d['interval'][0]:+.4f}, {d['interval'][1]:+.4f}]{' (falls beyond it)' if d['falls'] else ''}")
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
