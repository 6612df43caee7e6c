"""GRPO with a storyeval reward: a tiny policy learns to continue ROC first sentences, rewarded by UNION.

    python examples/grpo_story_reward.py                    # a few steps on the CPU, offline, under two minutes
    python examples/grpo_story_reward.py --steps 20 --output-dir runs/grpo

Needs the ``[rl]`` extra (``pip install -e ".[rl]"``, which adds trl). The policy is a
GPT-2-shaped model built from a config with random weights, small enough to train on a
CPU: it shows the wiring, not a useful story writer. Its tokenizer is the one the bundled
``union-roc`` checkpoint ships (MiniLM's WordPiece vocabulary), so nothing is downloaded.
The prompts are the first sentences of the ROCStories test split (``storyeval_training``'s
builder) when the data is there (``STORYEVAL_DATA``), else the few bundled below.

The reward is ``storyeval.reward("union", "roc")``: the probability that the prompt and its
completion, read as one story, are human-written rather than perturbed. Pass ``--guard``
for the guarded reward (benchmarks/experiments/reward_gaming.md says which holes it closes).
"""
from __future__ import annotations

import argparse
import tempfile

# used when the ROC data is absent: openings in the builders' form (lower-cased, tokenised, names as placeholders)
OPENINGS = [
    "[MALE] went to the bar with his friends .",
    "[FEMALE] wanted a new bike for her birthday .",
    "the family drove to the beach on saturday .",
    "[MALE] could not find his keys .",
    "[FEMALE] had a big test at school .",
    "it was raining when [NEUTRAL] left the house .",
    "[MALE] decided to bake a cake .",
    "the dog ran away from home .",
]


def openings(count: int, use_data: bool = True) -> list[str]:
    """``count`` ROC first sentences: the builder's test split when its data is there, else :data:`OPENINGS` (repeated)."""
    if use_data:
        try:
            from storyeval_training.data.builders import BUILDERS, load_split

            split = load_split(BUILDERS["roc"], "test")
            return [example["context"] for example in split.select(range(min(count, len(split))))]
        except (FileNotFoundError, ImportError) as error:
            print(f"ROC data not found ({error}); using the bundled openings")
    return [OPENINGS[i % len(OPENINGS)] for i in range(count)]


def tiny_policy(seed: int = 0):
    """A random GPT-2-shaped causal LM (2 layers, width 64) and the tokenizer of the bundled union-roc checkpoint."""
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from storyeval import download_model

    tokenizer = AutoTokenizer.from_pretrained(download_model("union/roc"))
    # a WordPiece (BERT) tokenizer: [CLS] opens a text, [SEP] ends it; prompts are padded on the left for generation
    tokenizer.bos_token, tokenizer.eos_token, tokenizer.padding_side = tokenizer.cls_token, tokenizer.sep_token, "left"
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=128, n_embd=64, n_layer=2, n_head=2,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return GPT2LMHeadModel(config), tokenizer


def train(reward_funcs, prompts: list[str], steps: int, output_dir: str, seed: int = 0, generations: int = 4,
          completion_length: int = 24):
    """``steps`` GRPO steps of the tiny policy on ``prompts``; returns the trainer (its ``state.log_history`` holds the rewards)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = tiny_policy(seed)
    config = GRPOConfig(
        output_dir=output_dir, max_steps=steps, per_device_train_batch_size=generations, num_generations=generations,
        max_completion_length=completion_length, learning_rate=1e-4, logging_steps=1, save_strategy="no",
        report_to="none", use_cpu=True, seed=seed, disable_tqdm=True, dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs, args=config, processing_class=tokenizer,
                          train_dataset=Dataset.from_dict({"prompt": prompts}))
    trainer.train()
    return trainer


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12, help="GRPO steps (default 12)")
    parser.add_argument("--prompts", type=int, default=32, help="ROC first sentences to train on (default 32)")
    parser.add_argument("--guard", action="store_true", help="the guarded reward")
    parser.add_argument("--output-dir", default=None, help="where the trainer writes (default: a temporary folder)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import storyeval

    reward = storyeval.reward("union", "roc", guard=args.guard)  # loads once, scores every step
    with tempfile.TemporaryDirectory() as scratch:
        trainer = train([reward], openings(args.prompts), args.steps, args.output_dir or scratch, args.seed)
    for entry in trainer.state.log_history:
        key = f"rewards/{reward.__name__}/mean"
        if key in entry:
            print(f"step {entry['step']}: mean {reward.__name__} reward {entry[key]:.4f}")


if __name__ == "__main__":
    main()
