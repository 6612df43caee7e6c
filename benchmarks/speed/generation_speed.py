"""Generation throughput of a plot-conditioned generator on this machine (plot coherence, stage 3).

    python -m benchmarks.speed.generation_speed --model-name-or-path outputs/plot-generator-roc/best

Samples ``--num-candidates`` stories (top-k 50, temperature 0.8, the
checkpoint's maximum length) for each of the first ``--plots`` manipulated
plots of the ROC validation split (the paper's manipulated storylines), and
reports stories/s, generated tokens/s and peak RSS. A generator is about
100 MB even in fp16, over the repo's checkpoint limit, so it is not bundled:
train one with ``storyeval-train-plot-generator`` (see benchmarks/experiments/plot_coherence.md).
"""
from __future__ import annotations

import argparse
import resource
import time

from ..common import command_line, machine, write_results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-name-or-path", required=True, help="a storyeval-train-plot-generator best/ folder")
    parser.add_argument("--plots", type=int, default=160)
    parser.add_argument("--num-candidates", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=16, help="plots per generate call")
    args = parser.parse_args(argv)
    if min(args.plots, args.num_candidates, args.batch_size) < 1:
        parser.error("--plots, --num-candidates and --batch-size must be positive")

    import torch

    from storyeval_training.data.builders import ROCStories, load_split
    from storyeval_training.data.plots.generator import build_generator, generate_stories

    validation = load_split(ROCStories, "validation")
    plots = [p for p in validation["manipulated_plot"] if any(p)][: args.plots]
    model, tokenizer = build_generator(args.model_name_or_path)
    generate_stories(model, tokenizer, plots[:2], num_candidates=1, seed=0)  # warm-up
    started = time.perf_counter()
    stories = generate_stories(model, tokenizer, plots, num_candidates=args.num_candidates, batch_size=args.batch_size, seed=0)
    seconds = time.perf_counter() - started
    texts = [s for row in stories for s in row]
    tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)
    result = {
        "plots": len(plots),
        "stories": len(texts),
        "seconds": round(seconds, 1),
        "stories_per_second": round(len(texts) / seconds, 2),
        "generated_tokens_per_second": round(tokens / seconds, 1),
        "mean_story_tokens": round(tokens / len(texts), 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "parameters_millions": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
    }
    payload = {"machine": machine(), "command": command_line(__name__, argv),
               "model": args.model_name_or_path, "torch_threads": torch.get_num_threads(), **result}
    print(result)
    print("wrote", write_results("generation_speed", payload))


if __name__ == "__main__":
    main()
