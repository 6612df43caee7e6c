"""Score an eval set on every rank at once, under accelerate or torchrun: each rank its own stories, on its device.

    accelerate launch --cpu --num_processes 2 examples/score_by_rank.py examples/stories.txt -o scores.json
    torchrun --nproc_per_node 2 examples/score_by_rank.py examples/stories.txt -o scores.json
    python examples/score_by_rank.py examples/stories.txt -o scores.json      # one process: the same scores

The stories (one per line) go through a DataLoader that ``accelerator.prepare`` shards, as an eval loop's
prompts would; ``storyeval.score_by_rank`` scores each rank's batch where it is and gathers the scores with
accelerate's ``gather_for_metrics``, which drops the stories the sampler repeats to even out the last step.
``--split`` instead splits the whole list with ``accelerator.split_between_processes``. The main process
writes the scores, in the file's order, to ``--output`` (JSON). Needs accelerate (the ``[train]`` extra).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stories", help="a .txt file, one story per line")
    parser.add_argument("-o", "--output", required=True, help="JSON file the main process writes the scores to")
    parser.add_argument("--metric", default="union", help="union, plot_coherence (story metrics)")
    parser.add_argument("--config", default="roc")
    parser.add_argument("--batch-size", type=int, default=4, help="stories per rank per step")
    parser.add_argument("--split", action="store_true", help="split the whole list between the ranks instead of a DataLoader")
    parser.add_argument("--on-invalid", default="raise", choices=["raise", "nan"])
    args = parser.parse_args(argv)

    import torch
    from accelerate import Accelerator

    from storyeval import download_model, load_from_checkpoint, score_by_rank

    # on a machine without CUDA, accelerate runs several processes only when told they are CPU processes
    # (`accelerate launch --cpu` tells it; under torchrun this does)
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    stories = Path(args.stories).read_text(encoding="utf-8").splitlines()
    scorer = load_from_checkpoint(download_model(f"{args.metric}/{args.config}"), device=accelerator.device)
    if args.split:
        with accelerator.split_between_processes(stories) as mine:
            scores = score_by_rank(scorer, mine, accelerator, on_invalid=args.on_invalid)
    else:
        loader = accelerator.prepare(torch.utils.data.DataLoader(stories, batch_size=args.batch_size))
        scores = []
        for batch in loader:
            scores += score_by_rank(scorer, batch, accelerator, on_invalid=args.on_invalid)
    if accelerator.is_main_process:
        Path(args.output).write_text(json.dumps({"scores": scores, "processes": accelerator.num_processes,
                                                 "settings": scorer.settings()}) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
