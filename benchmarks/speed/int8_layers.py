"""Int8 schemes for one checkpoint, and which layers' int8 weights move its scores most, on held-out stories.

    python -m benchmarks.speed.int8_layers --checkpoint hub_cards/union-roc-base --schemes float32 weights_int8 static_int8
    python -m benchmarks.speed.int8_layers --checkpoint hub_cards/union-roc-base --float-groups ffn_out qkv o ffn_in embeddings head

Every row scores the same held-out, auto-constructed stories: human stories of the validation split of the
checkpoint's corpus builder and one UNION negative of each (``storyeval-build-negatives``), none of them among the
test stories the fidelity rule is checked on (``int8_speed.py``), and never a human-judged set. It reports each
row's Spearman with torch float32 on the human stories alone (as the rule's test stories are) and on all of them,
the largest and mean absolute difference, the OpenVINO model's size on disk, and stories/s in this one process
(back to back, so the rows compare with each other; the machine's load is recorded).

Schemes (``--schemes``):
  ``float32``: the exported graph in OpenVINO without int8: the runtime's own speed;
  ``weights_int8``: every linear and embedding weight in int8 per output channel (NNCF), activations quantised by
  OpenVINO on the fly: what ``dtype="int8"`` runs for the MiniLM checkpoints;
  ``weights_int8_asym``: the same with asymmetric weights;
  ``static_int8``: NNCF's post-training quantisation for transformers, weights and activations (SmoothQuant,
  calibrated on 150 other validation pairs); ``static_int8_no_smoothquant`` without SmoothQuant;
  ``shipped``: the export ``dtype="int8"`` makes (``storyeval.scoring.int8.runtime``).
Groups (``--float-groups``): ``weights_int8`` with one group of layers kept in float32, one row each: how much of
the drift that group's int8 weights cause. ``a+b`` keeps both. ``--static-float-groups``: the same for ``static_int8``
(its weights and the activations into them stay float32).

Static int8 is calibrated (``--calibration``) on 150 other validation pairs of the checkpoint's corpus (``validation``),
or on text the project may ship a calibration made from (``wp_extra_breaks``): human stories of ``wp_extra`` in the WP
builder's train split, read as the modern-text check reads them (its ``roc`` or ``wp`` view, by the checkpoint's
corpus), each with one copy broken as that check breaks them; no ROCStories or human-judged story.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from storyeval.scoring.int8.runtime import LAYER_GROUPS

from ..common import command_line, machine, results_name, write_results
from .scoring_speed import score_agreement

# NNCF ignored-scope patterns over the exported graph's node names, the runtime's (a shipped scheme names them)
GROUPS = LAYER_GROUPS
SCHEMES = ("float32", "weights_int8", "weights_int8_asym", "static_int8", "static_int8_no_smoothquant", "shipped")


def held_out_stories(corpus: str, pairs: int, calibration_pairs: int = 150, seed: int = 0) -> tuple[list[str], list[str], list[str]]:
    """(scored stories: human, negative, human, ...; calibration stories), from disjoint pairs of the builder's
    validation split, none of them a test story."""
    from storyeval_training.data import build_negatives

    built = build_negatives.build(corpus, ("validation",), seed=42)
    test_ids = test_story_ids(corpus)
    validation = built["validation"].filter(lambda row: row["id"] not in test_ids).shuffle(seed=seed)
    if len(validation) < pairs + calibration_pairs:
        raise ValueError(f"the {corpus} validation split has {len(validation)} pairs outside the test files, fewer than "
                         f"--pairs {pairs} + {calibration_pairs} for calibration")
    scored, calibration = validation.select(range(pairs)), validation.select(range(pairs, pairs + calibration_pairs))
    return ([story for row in scored for story in (row["human"], row["negative"])],
            [story for row in calibration for story in (row["human"], row["negative"])], scored["id"])


def wp_extra_breaks(corpus: str, count: int = 300, seed: int = 0) -> list[str]:
    """``count`` calibration texts: ``wp_extra``'s human stories of the WP builder's train split (none of the modern-text
    check's test stories, none of the WP test stories), each read as the modern-text check's ``corpus`` view, then one
    copy of each broken by a seeded kind (:mod:`storyeval_training.data.breaks`), interleaved with the intact ones."""
    import random

    from storyeval_training import paths
    from storyeval_training.data import breaks, modern_breaks
    from storyeval_training.data.builders import WritingPrompts, load_split
    from storyeval_training.data.negatives.substitution import read_antonyms

    rows = load_split(WritingPrompts, "train", config_name="extra", **modern_breaks.AS_WRITTEN).filter(lambda r: r["id"].startswith("wph"))
    rows = rows.shuffle(seed=seed).select(range(min(len(rows), 4 * count)))
    units = modern_breaks.Units(read_antonyms(paths.data_dir() / "lexicon" / "conceptnet_antonym.txt"), seed)
    for row in rows:
        units.collect_foreign("train", "human", row["id"], row["sentences"])
    texts = []
    for row in rows:
        sentences, _ = modern_breaks.views(row["sentences"], random.Random(f"{seed}:view:{row['id']}"))[corpus]
        rng = random.Random(f"{seed}:{row['id']}")
        kind = rng.choice([kind for kind in breaks.KINDS if kind not in breaks.ENDING_KINDS])
        broken = units._break(kind, "train", "human", row["id"], sentences, rng) if len(sentences) >= breaks.MIN_SENTENCES else None
        if broken is not None:
            texts += [" ".join(sentences), " ".join(broken[0])]
        if len(texts) >= count:
            break
    return texts[:count]


def test_story_ids(corpus: str) -> set[str]:
    """The builder ids of every story of the test files the benchmarks' test stories come from."""
    if corpus != "roc":
        return set()  # the WP test stories are the builder's own test split, which its validation split never holds
    from storyeval_training.data.builders.roc import parse_plot_guided_line
    from storyeval_training.paths import data_dir

    path = data_dir() / "roc" / "rocstories_test.txt"
    return {parse_plot_guided_line(line, path, i)["id"] for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if line.strip()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a UNION-architecture checkpoint folder")
    parser.add_argument("--corpus", default="roc", choices=["roc", "wp"], help="the checkpoint's corpus (its builder's held-out stories)")
    parser.add_argument("--pairs", type=int, default=300, help="held-out (human, negative) pairs scored by every row")
    parser.add_argument("--schemes", nargs="*", default=[], choices=SCHEMES)
    parser.add_argument("--float-groups", nargs="*", default=[], help=f"groups kept in float32 one row at a time: {', '.join(list(GROUPS)[:6])}, "
                        "layer<i>, ffn_out<i>, ffn_in<i>, or several joined by +")
    parser.add_argument("--static-float-groups", nargs="*", default=[], help="static_int8 with these groups kept in float32, one row each")
    parser.add_argument("--calibration", default="validation", choices=["validation", "wp_extra_breaks"],
                        help="static int8's calibration text: other validation pairs of the corpus, or broken copies of wp_extra stories")
    parser.add_argument("--num-threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--output", type=results_name, default=None, help="results file name (default: <checkpoint>_int8_layers)")
    args = parser.parse_args(argv)
    unknown = [part for group in [*args.float_groups, *args.static_float_groups] for part in group.split("+") if part not in GROUPS]
    if unknown:
        parser.error(f"unknown --float-groups {unknown}")
    if not (args.schemes or args.float_groups or args.static_float_groups):
        parser.error("name at least one of --schemes, --float-groups or --static-float-groups")
    if not (Path(args.checkpoint) / "config.json").is_file():
        parser.error(f"--checkpoint {args.checkpoint}: no checkpoint there (config.json)")
    if args.pairs < 10 or args.num_threads < 1:
        parser.error("--pairs must be at least 10, --num-threads at least 1")

    import nncf
    import openvino

    from storyeval.checkpoints.resolution import checkpoint_name
    from storyeval.scoring import windows
    from storyeval.scoring.int8 import runtime
    from storyeval.scoring.sequence import load_union_scorer

    started = time.perf_counter()
    name = checkpoint_name(args.checkpoint)
    payload = {"machine": machine(), "command": command_line(__name__, argv), "checkpoint": name, "corpus": args.corpus,
               "num_threads": args.num_threads, "load_average_before": os.getloadavg(), "rows": {}}
    stories, calibration, ids = held_out_stories(args.corpus, args.pairs)
    if args.calibration == "wp_extra_breaks":
        calibration = wp_extra_breaks(args.corpus, len(calibration))
    payload["stories"] = {"validation_pairs": len(ids), "calibration_stories": len(calibration), "calibration": args.calibration,
                          "source": f"storyeval-build-negatives --dataset {args.corpus} (seed 42): validation split, none of the test files' stories"}
    scorer = load_union_scorer(args.checkpoint, device="cpu")
    reference = np.asarray(scorer.score(stories, batch_size=args.batch_size))
    story_windows = windows.all_windows(stories, scorer.windows)
    pad_id = scorer.tokenizer.pad_token_id or 0
    core = openvino.Core()

    def score(model) -> tuple[np.ndarray, float]:
        compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": args.num_threads, "INFERENCE_PRECISION_HINT": "f32",
                                                     "DYNAMIC_QUANTIZATION_GROUP_SIZE": 32})  # as the runtime compiles it
        request = compiled.create_infer_request()
        values = [0.0] * len(story_windows)
        clock = time.perf_counter()
        for chunk, ids_, mask in windows.padded_batches(story_windows, args.batch_size, pad_id):
            logits = np.asarray(request.infer({"input_ids": ids_, "attention_mask": mask})[0], dtype=np.float64).reshape(-1)
            for k, value in zip(chunk, 1.0 / (1.0 + np.exp(-logits))):
                values[k] = value
        seconds = time.perf_counter() - clock
        aggregate = windows.WINDOW_AGGREGATIONS[scorer.window_aggregation]
        return np.asarray([aggregate(v) for v in windows.by_story(story_windows, values, len(stories))]), seconds

    with tempfile.TemporaryDirectory() as folder:
        graph = Path(folder) / "float32.onnx"
        runtime.export_logits_graph(scorer.model, graph)
        calibration_items = [{"input_ids": ids_, "attention_mask": mask}
                             for _, ids_, mask in windows.padded_batches(windows.all_windows(calibration, scorer.windows), 1, pad_id)]

        def quietly(function, *positional, **options):  # NNCF's tables and progress bars
            with runtime.quiet_logging(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                return function(*positional, **options)

        def build(scheme: str, float_patterns=()):
            model = core.read_model(str(graph))
            ignored = nncf.IgnoredScope(patterns=list(float_patterns), validate=False) if float_patterns else None
            if scheme == "float32":
                return model
            if scheme in ("weights_int8", "weights_int8_asym"):
                mode = nncf.CompressWeightsMode.INT8_ASYM if scheme.endswith("asym") else nncf.CompressWeightsMode.INT8_SYM
                return quietly(nncf.compress_weights, model, mode=mode, ignored_scope=ignored)
            alpha = -1 if scheme.endswith("no_smoothquant") else nncf.AdvancedSmoothQuantParameters().matmul
            options = nncf.AdvancedQuantizationParameters(smooth_quant_alphas=nncf.AdvancedSmoothQuantParameters(matmul=alpha))
            return quietly(nncf.quantize, model, nncf.Dataset(calibration_items), model_type=nncf.ModelType.TRANSFORMER,
                           subset_size=len(calibration_items), advanced_parameters=options, ignored_scope=ignored)

        def measure(label: str, model, saved: Path | None = None) -> None:
            if saved is None:
                saved = Path(folder) / f"{len(payload['rows'])}.xml"
                openvino.save_model(model, str(saved))
            size_mb = sum(path.stat().st_size for path in saved.parent.glob(f"{saved.stem}.*")) / 2**20
            clock = time.perf_counter()
            scores, seconds = score(model)
            row = {"humans": score_agreement(scores[0::2].tolist(), reference[0::2].tolist()),
                   "all": score_agreement(scores.tolist(), reference.tolist()),
                   "stories_per_second": len(stories) / seconds, "model_mb": round(size_mb, 1),
                   "seconds_with_compile": round(time.perf_counter() - clock, 1), "load_average": os.getloadavg()}
            payload["rows"][label] = row
            print(f"{label:40s} Spearman humans {row['humans']['spearman_with_float32']:.5f} all {row['all']['spearman_with_float32']:.5f} "
                  f"{row['stories_per_second']:6.1f} stories/s {size_mb:7.1f} MB", flush=True)

        for scheme in args.schemes:
            if scheme == "shipped":
                backend = runtime.get_backend("openvino")
                exported = Path(folder) / "shipped"
                exported.mkdir()
                quietly(backend.export, scorer.model, scorer.tokenizer, exported)
                measure(scheme, core.read_model(str(exported / "model.xml")), exported / "model.xml")
            else:
                measure(scheme, build(scheme))
        for group in args.float_groups:
            patterns = [pattern for part in group.split("+") for pattern in GROUPS[part]]
            measure(f"weights_int8, {group} in float32", build("weights_int8", patterns))
        for group in args.static_float_groups:
            patterns = [pattern for part in group.split("+") for pattern in GROUPS[part]]
            measure(f"static_int8, {group} in float32", build("static_int8", patterns))
    payload["load_average_after"] = os.getloadavg()
    payload["seconds"] = round(time.perf_counter() - started, 1)
    print("wrote", write_results(args.output or f"{name.replace('-', '_')}_int8_layers", payload))


if __name__ == "__main__":
    main()
