"""``python -m storyeval_training.data.plots.generator`` (or ``accelerate launch -m``) trains a generator."""
from storyeval_training.data.plots.generator.training import main

if __name__ == "__main__":
    main()
