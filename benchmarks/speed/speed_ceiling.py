"""The fastest a checkpoint's encoder could score on this machine: its dense matrix products alone.

    python -m benchmarks.speed.speed_ceiling                      # hub_cards/union-roc, float32 and bfloat16

The 1,000 ROC test stories of ``scoring_speed.py`` are cut into the scorer's own
windows and batched as it batches them (longest first, 32 a batch, padded to the
batch's longest window). For each batch, the six dense products of every layer
(query, key, value, attention output, both feed-forward products) run on random
inputs and weights of the encoder's sizes, with torch's default threads.
Everything else is left out (embeddings, the attention scores themselves, a few
percent of the operations at these lengths, layer norms, softmax, GELU, the
head and the text side), so the time is a lower bound on scoring time and
stories / time an upper bound on stories/s. The same runs for a BERT-base-sized
encoder on the same batches bound the speed-up over BERT-base. Multiply-add
counts give the rate reached (GFLOP/s).
"""
from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F
from transformers import BertConfig

from ..common import RESULTS, command_line, machine, write_results
from .scoring_speed import CORPORA, add_workload_arguments, workload_checkpoint

# the sizes of the BERT-base-sized scorer scoring_speed.py measures: transformers' BertConfig defaults
BERT_BASE = {name: getattr(BertConfig(), name) for name in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")}


def batch_shapes(window_lengths: list[int], batch_size: int) -> list[tuple[int, int]]:
    """(rows, padded width) of each batch, in the scorer's order: longest windows first."""
    ordered = sorted(window_lengths, reverse=True)
    return [(len(ordered[i : i + batch_size]), ordered[i]) for i in range(0, len(ordered), batch_size)]


def encoder_flops(shapes: list[tuple[int, int]], sizes: dict) -> dict:
    """Floating-point operations (2 per multiply-add) over all batches: the dense products and the attention scores."""
    hidden, inner, layers = sizes["hidden_size"], sizes["intermediate_size"], sizes["num_hidden_layers"]
    dense = attention = 0
    for rows, width in shapes:
        dense += layers * rows * width * (4 * hidden * hidden + 2 * hidden * inner)  # q, k, v, output; up and down
        attention += layers * 2 * rows * width * width * hidden  # scores, then weighted values, over all heads
    return {"dense": 2.0 * dense, "attention": 2.0 * attention}


def dense_product_seconds(shapes: list[tuple[int, int]], sizes: dict, dtype: torch.dtype, seed: int = 0) -> float:
    """Time of every layer's six dense products over all batches (one untimed warm-up batch first)."""
    hidden, inner = sizes["hidden_size"], sizes["intermediate_size"]
    generator = torch.Generator().manual_seed(seed)

    def weight(out_features: int, in_features: int) -> torch.Tensor:
        # scaled so outputs keep unit variance: tiny values would turn denormal and slow the products down
        return (torch.randn(out_features, in_features, generator=generator) / in_features**0.5).to(dtype)

    square = [weight(hidden, hidden) for _ in range(4)]
    up, down = weight(inner, hidden), weight(hidden, inner)
    inputs = [torch.randn(rows * width, hidden, generator=generator).to(dtype) for rows, width in shapes]

    def layer(x: torch.Tensor) -> None:
        for w in square:
            F.linear(x, w)
        F.linear(F.linear(x, up), down)

    with torch.inference_mode():
        layer(inputs[0])
        started = time.perf_counter()
        for x in inputs:
            # each layer takes the same input: chained products of random weights would drift in size
            for _ in range(sizes["num_hidden_layers"]):
                layer(x)
        return time.perf_counter() - started


def measured_speed(metric: str, dtype: str) -> dict | None:
    """The full scorer's stories/s from scoring_speed.py's results file, if it was run."""
    path = RESULTS / f"{metric}_speed{'' if dtype == 'float32' else '_' + dtype}.json"
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    bert = saved.get("bert_base_sized", {}).get("stories_per_second")
    return {"file": str(path.relative_to(RESULTS.parent.parent)), "ours": saved["ours"]["stories_per_second"], "bert_base_sized": bert}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_workload_arguments(parser)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    args = parser.parse_args(argv)
    from storyeval.scoring.sequence import load_scorer

    checkpoint = workload_checkpoint(args)
    scorer = load_scorer(args.metric, checkpoint, device="cpu")
    encoder = scorer.model.config.encoder
    ours = {name: getattr(encoder, name) for name in BERT_BASE}
    stories = CORPORA[args.corpus](args.stories)
    shapes = batch_shapes([len(w) for story in stories for w in scorer.windows(story)], args.batch_size)
    flops = {"ours": encoder_flops(shapes, ours), "bert_base": encoder_flops(shapes, BERT_BASE)}
    payload = {
        "machine": machine(), "command": command_line(__name__, argv),
        "checkpoint": checkpoint, "stories": len(stories), "batches": len(shapes), "batch_size": args.batch_size,
        "padded_tokens": sum(rows * width for rows, width in shapes), "torch_threads": torch.get_num_threads(),
        "encoder": ours, "gflop": {name: {part: value / 1e9 for part, value in parts.items()} for name, parts in flops.items()},
        "dense_flop_ratio_bert_base_to_ours": flops["bert_base"]["dense"] / flops["ours"]["dense"], "by_dtype": {},
    }
    print(f"{len(stories)} stories, {len(shapes)} batches; GFLOP {json.dumps(payload['gflop'])}")
    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        row = {}
        for name, sizes in (("ours", ours), ("bert_base", BERT_BASE)):
            seconds = dense_product_seconds(shapes, sizes, dtype)
            row[name] = {"dense_seconds": seconds, "stories_per_second_ceiling": len(stories) / seconds,
                         "dense_gflop_per_second": flops[name]["dense"] / seconds / 1e9}
        row["speedup_ceiling"] = row["bert_base"]["dense_seconds"] / row["ours"]["dense_seconds"]
        row["measured_full_scorer"] = measured_speed(args.metric, dtype_name)
        payload["by_dtype"][dtype_name] = row
        print(dtype_name, json.dumps(row))
    print("wrote", write_results(f"{args.metric}_speed_ceiling", payload))


if __name__ == "__main__":
    main()
