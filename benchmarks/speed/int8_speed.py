"""Int8 scoring against torch float32 and bfloat16: speed, memory, score drift and human agreement.

    python -m benchmarks.speed.int8_speed                          # speed + drift, union-roc, 1,000 ROC test stories
    python -m benchmarks.speed.int8_speed --metric plot_coherence  # the same for plot-coherence-roc
    python -m benchmarks.speed.int8_speed --drift-only             # drift alone: no timing, valid on a busy machine
    python -m benchmarks.speed.int8_speed --human                  # Pearson / Spearman / Kendall on the human sets

Speed: each scorer runs in a fresh process, through ``scoring_speed.py``'s own
measurement, on the stories of that benchmark: torch float32, torch bfloat16, every int8 backend
(OpenVINO, the shipped one, CTranslate2, which shipped first, and ONNX Runtime from
``int8_backends.py``), CTranslate2 in int16 and float32 (how much comes from int8 and how much from the runtime) and
a BERT-base-sized torch scorer (random weights, same code path, float32), each
``--repeats`` times, the median kept. The int8 export is made in an untimed run
first; the timed runs read it from the cache in their warm-up. Drift: Spearman, max and
mean absolute difference of each int8 backend's scores against float32 on the
same stories. Human agreement: each checkpoint's correlations with the human
judgments (the sets ``union_correlation.py`` and
``plot_coherence_correlation.py`` use) in float32 and in int8, and how far
int8 moves each coefficient; a move over 0.005 is printed as a warning. These
human sets are test sets: nothing here chooses anything.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ..common import CHECKOUT, command_line, correlations, machine, results_name, write_results
from ..correlation import HUMAN_SETS, load_human_set
from . import scoring_speed
from .scoring_speed import CORPORA, add_workload_arguments, score_agreement, workload_checkpoint

# the first is what dtype="int8" runs; openvino-float32 is its runtime without int8
BACKENDS = ("openvino", "ctranslate2", "ctranslate2-int16", "ctranslate2-float32", "onnxruntime", "openvino-float32")
COEFFICIENTS = ("pearson", "spearman", "kendall")
def row_name(backend: str) -> str:
    """A results row: int8_<backend> for the int8 ones, the name itself (ctranslate2-int16) for the wider types."""
    return backend if "-" in backend else f"int8_{backend}"


NOTABLE_MOVE = 0.005  # the bound on how far int8 may move a human-set coefficient unremarked

# run before scoring_speed.py's measuring child, in the same fresh process: the thread count, and which
# int8 backend dtype="int8" means there; it takes its own arguments off the end of the command line, and finds
# the benchmarks package where this process found it (python -m benchmarks.speed.int8_speed run from the checkout)
CHILD_SETUP = r"""
import sys
scheme, backend, threads = sys.argv.pop(), sys.argv.pop(), int(sys.argv.pop())
if threads:
    import torch
    torch.set_num_threads(threads)
if backend:
    from benchmarks.speed import int8_backends
    from storyeval.scoring import sequence
    from storyeval.scoring.int8 import runtime as int8_runtime
    from storyeval.scoring.int8.scorer import load_int8_scorer
    int8_backends.register()
    int8_runtime.DEFAULT_BACKEND = backend
    # the int8 scorer, by the scheme measured, as drift_only() scores: it measures a checkpoint the rule refuses too
    if backend == "openvino-float32":  # quantises nothing, so no checkpoint's int8 scheme applies to it
        scheme = int8_runtime.DEFAULT_SCHEME
    sequence.load_scorer = lambda kind, checkpoint, device=None: load_int8_scorer(checkpoint, backend, threads or None, scheme=scheme or None)
"""


def measure(args, kind: str, stories_path: Path, dtype: str, backend: str = "", repeats: int | None = None) -> tuple[dict, list[float]]:
    """The median of fresh-process runs of scoring_speed.py's child (each kept under "runs"), and the scores of the last."""
    runs = []
    for _ in range(repeats or args.repeats):
        command = [sys.executable, "-c", CHILD_SETUP + scoring_speed.CHILD, args.checkpoint, kind, str(stories_path), str(args.batch_size), dtype,
                   str(args.num_threads), backend, args.scheme or ""]
        out = subprocess.run(command, capture_output=True, text=True)
        if out.returncode:  # the child's own error, not only its exit status
            raise SystemExit(f"the {kind} {dtype} {backend or 'torch'} run failed:\n{out.stderr[-3000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    scores = runs[-1].pop("scores")
    for run in runs:
        run.pop("scores", None)
    summary = {key: statistics.median(run[key] for run in runs) for key in ("stories_per_second", "peak_rss_mb", "load_seconds")}
    return {**summary, "dtype": dtype, "backend": backend or "torch", "torch_threads": runs[0]["torch_threads"], "runs": runs}, scores


def speed(args, stories: list[str]) -> dict:
    stories_path = CHECKOUT / "benchmarks" / "results" / ".int8_speed_stories.txt"
    stories_path.parent.mkdir(parents=True, exist_ok=True)
    stories_path.write_text("\n".join(stories) + "\n", encoding="utf-8")
    rows, drift = {}, {}
    try:
        rows["float32"], reference = measure(args, args.metric, stories_path, "float32")
        if not args.skip_bfloat16:
            rows["bfloat16"], low = measure(args, args.metric, stories_path, "bfloat16")
            drift["bfloat16"] = score_agreement(low, reference)
        for backend in args.backends:
            measure(args, args.metric, stories_path, "int8", backend, repeats=1)  # the export, outside the timed runs
            rows[row_name(backend)], scores = measure(args, args.metric, stories_path, "int8", backend)
            drift[row_name(backend)] = score_agreement(scores, reference)
        if not args.skip_bert_base:
            rows["bert_base_sized_float32"], _ = measure(args, "bert-base", stories_path, "float32")
    finally:
        stories_path.unlink(missing_ok=True)
    for name, row in rows.items():
        print(f"{name:26s} {row['stories_per_second']:7.1f} stories/s  peak RSS {row['peak_rss_mb']:6.0f} MB")
    payload = {"speed": rows, "agreement_with_float32": drift}
    if "bert_base_sized_float32" in rows:
        bert = rows["bert_base_sized_float32"]["stories_per_second"]
        payload["speedup_vs_bert_base_float32"] = {name: row["stories_per_second"] / bert for name, row in rows.items()}
    return payload


def int8_scorer(checkpoint: str, backend: str, num_threads: int, scheme: str | None = None):
    from storyeval.scoring.int8.scorer import load_int8_scorer

    from . import int8_backends

    int8_backends.register()
    return load_int8_scorer(checkpoint, backend, num_threads or None, scheme=scheme)


def drift_only(args, stories: list[str]) -> dict:
    """Scores in this process, untimed: how far each int8 backend's scores are from float32's."""
    from storyeval.scoring.sequence import load_scorer

    scorer = load_scorer(args.metric, args.checkpoint, device="cpu")
    reference = scorer.score(stories, batch_size=args.batch_size)
    drift = {}
    if not args.skip_bfloat16:
        drift["bfloat16"] = score_agreement(scorer.score(stories, batch_size=args.batch_size, dtype="bfloat16"), reference)
    for backend in args.backends:
        scores = int8_scorer(args.checkpoint, backend, args.num_threads, args.scheme).score(stories, batch_size=args.batch_size)
        drift[row_name(backend)] = score_agreement(scores, reference)
    return {"agreement_with_float32": drift}


def human_sets(metric: str, names: list[str] | None = None) -> dict[str, tuple[list[str], list[float]]]:
    """name -> (stories, human scores) of ``names``, by default UNION's ROC and WP sets, or the plot paper's AMT set."""
    names = names or (("union_roc", "union_wp") if metric == "union" else ("plot_amt_roc",))
    return {name: (human_set.stories, human_set.human) for name in names for human_set in [load_human_set(name)]}


def human_agreement(args) -> dict:
    from storyeval.checkpoints.resolution import checkpoint_name
    from storyeval.scoring.sequence import load_scorer

    sets = human_sets(args.metric, args.sets)
    checkpoints = args.human_checkpoint or [args.checkpoint]
    if args.metric == "union" and not args.human_checkpoint:
        checkpoints = [str(CHECKOUT / "hub_cards" / name) for name in ("union-roc", "union-wp")]
    result, notable = {}, []
    for checkpoint in checkpoints:
        scorer = load_scorer(args.metric, checkpoint, device="cpu")
        label = checkpoint_name(checkpoint)  # a Hub cache snapshot's folder is named by its commit
        result[label] = {}
        for set_name, (stories, human) in sets.items():
            rows = {"float32": correlations(scorer.score(stories, batch_size=args.batch_size), human)}
            for backend in args.backends:
                row = correlations(int8_scorer(checkpoint, backend, args.num_threads, args.scheme).score(stories, batch_size=args.batch_size), human)
                row["moved"] = {name: row[name] - rows["float32"][name] for name in COEFFICIENTS}
                rows[row_name(backend)] = row
                notable += [f"{label} on {set_name}, int8 {backend}: {name} moved {move:+.4f}"
                            for name, move in row["moved"].items() if abs(move) > NOTABLE_MOVE]
            result[label][set_name] = rows
            for name, row in rows.items():
                print(f"{label:20s} {set_name:8s} {name:22s} " + " / ".join(f"{c} {row[c]:.4f}" for c in COEFFICIENTS))
    for line in notable:
        print(f"WARNING: {line} (more than {NOTABLE_MOVE})")
    return {"human_agreement": result, f"moved_more_than_{NOTABLE_MOVE}": notable}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_workload_arguments(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--drift-only", action="store_true", help="score drift against float32 only, untimed")
    mode.add_argument("--human", action="store_true", help="agreement with the human sets, float32 next to int8")
    parser.add_argument("--human-checkpoint", action="append", default=[], help="with --human: checkpoint folders (default: the bundled ones)")
    parser.add_argument("--sets", nargs="+", default=None, choices=HUMAN_SETS,
                        help="with --human: the human sets (default: union_roc and union_wp for union, plot_amt_roc for plot_coherence); "
                             "the fidelity rule takes every set BENCHMARKS.md reports for the checkpoint")
    parser.add_argument("--scheme", default=None, help="the int8 export scheme (default: the checkpoint's measured one, else "
                        "weights_int8; weights_int8-float:<group>+... keeps those layer groups in float32)")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--skip-bert-base", action="store_true")
    parser.add_argument("--skip-bfloat16", action="store_true", help="leave out torch bfloat16 (speed and drift modes)")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per scorer; the median is reported")
    parser.add_argument("--num-threads", type=int, default=0, help="threads for torch and the int8 sessions (0: torch's default)")
    parser.add_argument("--output", type=results_name, default=None, help="name of the results file (default: <metric>_int8_<mode>)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.stories < 1 or args.num_threads < 0:
        parser.error("--repeats and --stories must be at least 1, --num-threads at least 0")
    if (args.human_checkpoint or args.sets) and not args.human:
        parser.error("--human-checkpoint and --sets go with --human")
    if args.scheme is not None:
        from storyeval.scoring.int8.runtime import scheme_float_patterns

        try:
            scheme_float_patterns(args.scheme)
        except ValueError as error:
            parser.error(str(error))
    for folder in args.human_checkpoint:  # a mistyped path fails here, before any scoring or results file
        if not (Path(folder) / "config.json").is_file():
            parser.error(f"--human-checkpoint {folder}: no checkpoint there (config.json)")
    args.checkpoint = workload_checkpoint(args)
    command = command_line(__name__, argv)
    payload = {"machine": machine(), "command": command, "metric": args.metric, "checkpoint": args.checkpoint, "batch_size": args.batch_size,
               "num_threads": args.num_threads or None, "scheme": args.scheme, "load_average": os.getloadavg()}
    started = time.perf_counter()
    if args.human:
        payload.update(human_agreement(args))
        mode_name = "human"
    else:
        stories = CORPORA[args.corpus](args.stories)
        payload["stories"] = len(stories)
        payload.update(drift_only(args, stories) if args.drift_only else speed(args, stories))
        mode_name = "drift" if args.drift_only else "speed"
        for name, row in payload["agreement_with_float32"].items():
            print(f"{name:26s} vs float32: " + ", ".join(f"{key} {value:.4g}" for key, value in row.items()))
    payload["seconds"] = round(time.perf_counter() - started, 1)
    print("wrote", write_results(args.output or f"{args.metric}_int8_{mode_name}", payload))


if __name__ == "__main__":
    main()
