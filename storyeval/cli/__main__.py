"""``python -m storyeval.cli``: the ``storyeval`` command."""
import sys

from storyeval.cli.main import main

sys.exit(main())
