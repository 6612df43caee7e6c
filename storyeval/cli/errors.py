"""Bad input as one line on stderr and exit status 1, the same for every ``storyeval`` subcommand that scores."""
from __future__ import annotations

import sys
from collections.abc import Callable

from storyeval.files import InputError

# LookupError: an unknown config, missing NLTK data; ImportError: an optional runtime (dtype int8, Ray) is missing, and
# its message says what to install
BAD_INPUT = (InputError, LookupError, OSError, ValueError, TypeError, ImportError)


def reporting_bad_input(job: Callable[[], int | None]) -> int:
    """``job()``'s exit status (0 for None), or 1 after one ``storyeval: error: ...`` line if it raised on bad input."""
    try:
        return job() or 0
    except IndexError:
        raise  # a LookupError too, but a bug here, not bad input: keep its traceback
    except BAD_INPUT as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"storyeval: error: {message}", file=sys.stderr)
        return 1
