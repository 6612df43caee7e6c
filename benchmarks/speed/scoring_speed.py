"""Scoring speed, memory and cold-load time of a story-metric checkpoint on this machine.

    python -m benchmarks.speed.scoring_speed                     # union, hub_cards/union-roc
    python -m benchmarks.speed.scoring_speed --metric plot_coherence --checkpoint hub_cards/plot-coherence-roc --skip-bert-base

Each measurement runs in a fresh process: cold load (imports included, and
also reported on their own), stories/s over 1,000 ROC test stories (``--corpus wp``: the WP
builder's test stories, about 200 words each, with their prompts) with peak
RSS, and the same for a BERT-base-sized scorer (random weights, same code
path and dtype) for the speed ratio. ``text_seconds`` times the text side of
scoring (normalisation and tokenisation) again on its own. With ``--dtype bfloat16`` it also reports
how far the bfloat16 scores are from float32 ones on the same stories.
Runs on this machine vary by about 15%, so each is repeated and the median kept.
Fresh processes on one host can differ by far more than that (11.8 to 19.2 stories/s for one scorer), so
``--same-process N`` also times both scorers in one process, alternating over N rounds (ABBA order, so a
drift in the machine's speed falls on both), and reports the ratio of their median speeds there.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from storyeval.inputs import DTYPE_NAMES
from storyeval_training.paths import data_dir

from ..common import CHECKOUT, RESULTS, command_line, machine, results_name, write_results

CHILD = r"""
import json, resource, sys, time
started = time.perf_counter()
import torch
from storyeval.scoring.sequence import load_scorer
import storyeval.models.union  # transformers' modeling code, else imported inside the load
import_seconds = time.perf_counter() - started
checkpoint, kind, stories_path, batch_size, dtype = sys.argv[1:6]
if kind == "bert-base":
    from transformers import AutoTokenizer
    from benchmarks.speed.baseline_scorer import bert_base_sized_scorer
    scorer = bert_base_sized_scorer(AutoTokenizer.from_pretrained(checkpoint))
else:
    scorer = load_scorer(kind, checkpoint, device="cpu")
if "compile" in sys.argv[6:]:  # torch.compile of the float32 model, shapes left dynamic (every batch has its own width)
    scorer._models[(scorer.device, torch.float32)] = torch.compile(scorer.model, dynamic=True)
load_seconds = time.perf_counter() - started
stories = [line.rstrip("\n") for line in open(stories_path, encoding="utf-8")]
scorer.score(stories[:32], batch_size=int(batch_size), dtype=dtype)  # warm-up
started = time.perf_counter()
scores = scorer.score(stories, batch_size=int(batch_size), dtype=dtype)
seconds = time.perf_counter() - started
started = time.perf_counter()
for story in stories:  # the text side of scoring alone: normalisation and tokenisation
    scorer.windows(story)
text_seconds = time.perf_counter() - started
print(json.dumps({"load_seconds": load_seconds, "import_seconds": import_seconds, "score_seconds": seconds, "text_seconds": text_seconds,
                  "stories": len(stories),
                  "stories_per_second": len(stories) / seconds, "torch_threads": torch.get_num_threads(),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "scores": scores}))
"""

# ours and the BERT-base-sized scorer in one process: the ratio without the spread between processes
PAIRED_CHILD = r"""
import json, statistics, sys, time
import torch
from storyeval.scoring.sequence import load_scorer
from benchmarks.speed.baseline_scorer import bert_base_sized_scorer
checkpoint, kind, stories_path, batch_size, dtype, rounds = sys.argv[1:7]
ours = load_scorer(kind, checkpoint, device="cpu")
bert = bert_base_sized_scorer(ours.tokenizer)
stories = [line.rstrip("\n") for line in open(stories_path, encoding="utf-8")]
scorers = {"ours": ours, "bert_base_sized": bert}
speeds = {name: [] for name in scorers}
for scorer in scorers.values():
    scorer.score(stories[:32], batch_size=int(batch_size), dtype=dtype)  # warm-up
for round_ in range(int(rounds)):
    for name in (scorers if round_ % 2 == 0 else reversed(scorers)):
        started = time.perf_counter()
        scorers[name].score(stories, batch_size=int(batch_size), dtype=dtype)
        speeds[name].append(len(stories) / (time.perf_counter() - started))
ratios = [a / b for a, b in zip(speeds["ours"], speeds["bert_base_sized"])]
print(json.dumps({"rounds": int(rounds), "torch_threads": torch.get_num_threads(), "stories_per_second": speeds,
                  "median_stories_per_second": {k: statistics.median(v) for k, v in speeds.items()},
                  "speedup_vs_bert_base": statistics.median(speeds["ours"]) / statistics.median(speeds["bert_base_sized"]),
                  "round_ratio_range": [min(ratios), max(ratios)]}))
"""


def child_result(script: str, *argv) -> dict:
    """Run ``script`` in a fresh Python process and return the JSON object it prints last."""
    # the child imports the baseline from this package, whatever folder the benchmark was started in
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", script, *map(str, argv)], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_same_process(checkpoint: str, kind: str, stories_path: str, batch_size: int, rounds: int, dtype: str) -> dict:
    return child_result(PAIRED_CHILD, checkpoint, kind, stories_path, batch_size, dtype, rounds)


def roc_test_stories(n: int) -> list[str]:
    from storyeval_training.data.builders.roc import parse_plot_guided_line

    path = data_dir() / "roc" / "rocstories_test.txt"
    lines = path.read_text(encoding="utf-8").splitlines()[:n]
    return [" ".join(parse_plot_guided_line(line, path, i)["sentences"]) for i, line in enumerate(lines, 1)]


def wp_test_stories(n: int) -> list[str]:
    """The first ``n`` test stories of the WP builder's ``extra`` config (cut at 200 words), each after its prompt."""
    from storyeval_training.data.builders import WritingPrompts, load_split

    test = load_split(WritingPrompts, "test", config_name="extra")
    return [story if story.startswith(context) else f"{context} {story}" for context, story in zip(test["context"][:n], test["story"][:n])]


def wp_held_out_stories(n: int) -> list[str]:
    """``n`` WP stories no shipped checkpoint trained on, for the int8 fidelity rule's 1,000 (the WP builder's test split
    holds 411): its test stories, then its validation stories, then ``wp_extra``'s machine stories of the machine builder's
    test split, each after its prompt and cut at 200 words as the builders cut them."""
    from storyeval_training.data.builders import WritingPrompts, WritingPromptsMachine, load_split

    splits = [load_split(WritingPrompts, split, config_name="extra") for split in ("test", "validation")]
    splits.append(load_split(WritingPromptsMachine, "test"))
    stories = [story if story.startswith(context) else f"{context} {story}"
               for split in splits for context, story in zip(split["context"], split["story"])]
    return stories[:n]


CORPORA = {"roc": roc_test_stories, "wp": wp_test_stories, "wp-held-out": wp_held_out_stories}


def run(checkpoint: str, kind: str, stories_path: str, batch_size: int, repeats: int, dtype: str,
        compiled: bool = False) -> tuple[dict, list[float]]:
    """The median of ``repeats`` fresh-process measurements (each kept under "runs"), and the scores of the last;
    ``compiled``: the float32 model through ``torch.compile``."""
    runs = []
    for _ in range(repeats):
        runs.append(child_result(CHILD, checkpoint, kind, stories_path, batch_size, dtype, *(["compile"] if compiled else [])))
    scores = runs[-1]["scores"]
    for measured in runs:
        del measured["scores"]
    summary = {key: statistics.median(r[key] for r in runs) for key in ("load_seconds", "import_seconds", "stories_per_second", "text_seconds", "peak_rss_mb")}
    return {**summary, "torch_threads": runs[0]["torch_threads"], "stories": runs[0]["stories"], "runs": runs}, scores


def score_agreement(scores: list[float], reference: list[float]) -> dict:
    from scipy import stats

    differences = [abs(a - b) for a, b in zip(scores, reference)]
    return {
        "max_abs_difference": max(differences),
        "mean_abs_difference": sum(differences) / len(differences),
        "spearman_with_float32": stats.spearmanr(scores, reference).statistic,
    }


def add_workload_arguments(parser: argparse.ArgumentParser, batch_size: bool = True) -> None:
    """The scorer and stories a speed measurement runs on (shared with speed_ceiling.py and batch_tokens.py, whose
    ``--settings`` give the batch sizes: ``batch_size=False``)."""
    parser.add_argument("--metric", default="union", choices=["union", "plot_coherence"])
    parser.add_argument("--checkpoint", default=None, help="checkpoint folder (default: the bundled roc checkpoint of --metric)")
    parser.add_argument("--stories", type=int, default=1000, help="how many test stories (at most the corpus's test split)")
    parser.add_argument("--corpus", default="roc", choices=sorted(CORPORA),
                        help="whose test stories: ROC's, or WP's (about 200 words; wp-held-out: 1,000 held-out WP stories, the int8 rule's)")
    if batch_size:
        parser.add_argument("--batch-size", type=int, default=32)


def workload_checkpoint(args) -> str:
    """``--checkpoint``, or the bundled roc checkpoint of ``--metric``."""
    if args.checkpoint is not None:
        return args.checkpoint
    from storyeval.checkpoints.resolution import resolve_checkpoint

    return str(resolve_checkpoint(args.metric, "roc"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_workload_arguments(parser)
    parser.add_argument("--skip-bert-base", action="store_true")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per scorer; the median is reported")
    parser.add_argument("--dtype", default="float32", choices=DTYPE_NAMES)
    parser.add_argument("--same-process", type=int, default=0, metavar="ROUNDS",
                        help="also time ours and the BERT-base-sized scorer in one process, alternating, this many rounds "
                             "(0: not); the ratio of their median speeds there is free of the spread between processes")
    parser.add_argument("--torch-compile", action="store_true",
                        help="also time our float32 model through torch.compile (its first batches compile, in the warm-up), "
                             "beside the plain one, and how far its scores are from the plain ones")
    parser.add_argument("--output", type=results_name, default=None, help="results file name (default: <metric>_speed[_<dtype>], the bundled checkpoint's)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.torch_compile and args.dtype != "float32":
        parser.error("--torch-compile times the float32 model: leave --dtype out")
    if args.same_process < 0 or (args.same_process and args.skip_bert_base):
        parser.error("--same-process needs a number of rounds of at least 1, and the BERT-base-sized scorer (no --skip-bert-base)")
    args.checkpoint = workload_checkpoint(args)
    stories_path = RESULTS / f".{args.corpus}_test_stories.txt"
    stories_path.parent.mkdir(parents=True, exist_ok=True)
    stories_path.write_text("\n".join(CORPORA[args.corpus](args.stories)) + "\n", encoding="utf-8")
    try:
        ours, scores = run(args.checkpoint, args.metric, str(stories_path), args.batch_size, args.repeats, args.dtype)
        print("ours:", json.dumps({k: v for k, v in ours.items() if k != "runs"}))
        payload = {"machine": machine(), "command": command_line(__name__, argv), "metric": args.metric, "checkpoint": args.checkpoint,
                   "corpus": args.corpus,
                   "batch_size": args.batch_size, "dtype": args.dtype, "ours": ours}
        if args.dtype != "float32":
            _, reference = run(args.checkpoint, args.metric, str(stories_path), args.batch_size, 1, "float32")
            payload["agreement_with_float32"] = score_agreement(scores, reference)
            print("agreement with float32:", json.dumps(payload["agreement_with_float32"]))
        if args.torch_compile:
            compiled, compiled_scores = run(args.checkpoint, args.metric, str(stories_path), args.batch_size, args.repeats, "float32", compiled=True)
            payload["torch_compile"] = {**compiled, "agreement_with_float32": score_agreement(compiled_scores, scores)}
            print("torch.compile:", json.dumps({k: v for k, v in payload["torch_compile"].items() if k != "runs"}))
        if not args.skip_bert_base:
            bert, _ = run(args.checkpoint, "bert-base", str(stories_path), args.batch_size, args.repeats, args.dtype)
            print("bert-base-sized:", json.dumps({k: v for k, v in bert.items() if k != "runs"}))
            payload["bert_base_sized"] = bert
            payload["speedup_vs_bert_base"] = ours["stories_per_second"] / bert["stories_per_second"]
            print(f"speed-up: {payload['speedup_vs_bert_base']:.1f}x")
        if args.same_process:
            payload["same_process"] = run_same_process(args.checkpoint, args.metric, str(stories_path), args.batch_size, args.same_process, args.dtype)
            same = payload["same_process"]
            low, high = same["round_ratio_range"]
            print(f"speed-up in one process: {same['speedup_vs_bert_base']:.3f}x (rounds {low:.3f} to {high:.3f})")
    finally:
        stories_path.unlink(missing_ok=True)
    suffix = "" if args.dtype == "float32" else f"_{args.dtype}"
    print("wrote", write_results(args.output or f"{args.metric}_speed{suffix}", payload))


if __name__ == "__main__":
    main()
