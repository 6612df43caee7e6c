"""Length-aware batching: windows are batched by length across one call, and scores come back in input order."""
from storyeval.scoring import windows


def test_long_windows_do_not_pad_short_ones_and_order_is_restored():
    # story 0 and 2 are ROC-length, story 1 is WP-length (two long windows), story 3 is ROC-length again
    story_windows = [(0, [1] * 5), (1, [1] * 40), (1, [1] * 38), (2, [1] * 6), (3, [1] * 4)]
    batches = list(windows.padded_batches(story_windows, batch_size=2, pad_id=0))
    assert [ids.shape for _, ids, _ in batches] == [(2, 40), (2, 6), (1, 4)]  # the two long windows share a batch
    assert [chunk for chunk, _, _ in batches] == [[1, 2], [3, 0], [4]]
    values = [0.0] * len(story_windows)
    for chunk, _, mask in batches:
        for k, row in zip(chunk, mask):
            values[k] = float(row.sum())  # a window's "score": its own length, so order errors show
    assert windows.by_story(story_windows, values, 4) == [[5.0], [40.0, 38.0], [6.0], [4.0]]
