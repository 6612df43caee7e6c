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


def test_a_token_cap_shrinks_batches_of_long_windows_only():
    # two long windows (512 tokens), then six short ones: a cap of 1,024 tokens halves the long batch, not the short
    story_windows = [(0, [1] * 512), (1, [1] * 500), (2, [1] * 300)] + [(3 + k, [1] * 80) for k in range(6)]
    capped = list(windows.padded_batches(story_windows, batch_size=4, pad_id=0, max_tokens=1024))
    assert [ids.shape for _, ids, _ in capped] == [(2, 512), (3, 300), (4, 80)]  # 1,024 // 300: three rows
    assert sorted(k for chunk, _, _ in capped for k in chunk) == list(range(len(story_windows)))  # each window once
    # a window longer than the cap still gets a batch of its own, never dropped
    assert [ids.shape for _, ids, _ in windows.padded_batches(story_windows[:1], batch_size=4, pad_id=0, max_tokens=100)] == [(1, 512)]
    # no cap: the batch size alone, as before
    assert [ids.shape[0] for _, ids, _ in windows.padded_batches(story_windows, batch_size=4, pad_id=0)] == [4, 4, 1]
