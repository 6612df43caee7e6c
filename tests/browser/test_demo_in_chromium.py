"""The combined demo driven in headless Chromium: type a story, submit, read the scores.

Needs Debian's ``chromium`` (``apt-get install -y chromium``) and the ``demo``
extra. Without Chromium the tests skip, unless ``STORYEVAL_REQUIRE_BROWSER=1``
(as in ``.ci/run``) makes that a failure. A screenshot of the scored page is
saved to ``$STORYEVAL_SCREENSHOT_DIR`` (default ``build/browser``).
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("STORYEVAL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
STORY = (
    "Tom went to the store to buy some milk. He found the milk in the back of the store. "
    "He paid for the milk at the counter. The sky is made of green cheese. Tom drove home happy with his milk."
)

if not CHROMIUM:
    if os.environ.get("STORYEVAL_REQUIRE_BROWSER") == "1":
        pytest.fail("STORYEVAL_REQUIRE_BROWSER=1 but no chromium: apt-get install -y chromium", pytrace=False)
    pytest.skip("no chromium on this machine (apt-get install -y chromium)", allow_module_level=True)
playwright_sync = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[demo]'")
pytest.importorskip("gradio", reason="pip install -e '.[demo]'")

pytestmark = pytest.mark.browser


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def demo_url():
    port = free_port()
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"}
    server = subprocess.Popen([sys.executable, "-m", "storyeval.cli.main", "demo", "--port", str(port)], cwd=CHECKOUT, env=env)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 180
    while True:
        if server.poll() is not None:
            pytest.fail(f"the demo exited with code {server.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                break
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                pytest.fail("the demo did not start within 180 s")
            time.sleep(1)
    yield url
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture(scope="module")
def page(demo_url):
    flags = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync"]
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=flags)
        page = browser.new_page(viewport={"width": 1280, "height": 1600})
        page.goto(demo_url)
        page.wait_for_selector("#story textarea", timeout=60_000)
        yield page
        browser.close()


def choose(page, corpus: str, tier: str) -> None:
    """The kind of story and the checkpoints' tier (where the base tier is offered), as a user clicks them."""
    page.get_by_label("Long stories that open with a prompt" if corpus == "wp" else "Short stories, about five sentences").check()
    if page.locator("#tier").count():
        page.get_by_label("Base: MPNet-base" if tier == "base" else "Fast: MiniLM-L6").check()


def submit_story(page, story: str) -> None:
    page.fill("#story textarea", story)
    page.click("#score-button")


def wait_for_status(page, pattern: str) -> str:
    page.wait_for_function(
        "pattern => new RegExp(pattern).test(document.querySelector('#status')?.innerText || '')", arg=pattern, timeout=120_000
    )
    return page.inner_text("#status")


def upload_file(page, path: Path) -> None:
    # a fresh page: once a file is chosen, Gradio replaces the file input with a preview
    page.reload()
    page.wait_for_selector("#story textarea", timeout=60_000)
    page.get_by_role("tab", name="Score a file").click()
    page.set_input_files("#upload input[type=file]", str(path))
    page.wait_for_timeout(1000)  # let the upload finish before the click is handled
    page.click("#upload-button")


def screenshot(page, name: str) -> Path:
    out_dir = Path(os.environ.get("STORYEVAL_SCREENSHOT_DIR", CHECKOUT / "build" / "browser"))
    out_dir.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out_dir / name), full_page=True)
    return out_dir / name


def test_nothing_is_shown_before_anything_is_scored(page):
    # an empty table shows placeholder headers ("1 2 3"): the tables appear with their first scores
    for elem_id in ("scores", "attribution", "highlight"):
        assert not page.locator(f"#{elem_id}").is_visible(), elem_id
    assert "1\n2\n3" not in page.inner_text("body")
    screenshot(page, "demo-empty.png")


def test_the_page_opens_on_unions_default_config_and_scores_with_it(page):
    from storyeval.checkpoints.backbones import base_backbone_installed
    from storyeval.cli.demo import CONFIGS, default_choice

    corpus, tier = default_choice()
    if tier == "base" and not base_backbone_installed():
        pytest.skip("the base tier's backbone is not installed")
    config = CONFIGS[corpus, tier]["union"]  # what evaluate.load("union") loads
    assert page.locator("#wp-note").is_visible() == (corpus == "wp")
    submit_story(page, STORY)
    page.wait_for_function(f"() => /UNION \\({config}\\)/.test(document.querySelector('#scores')?.innerText || '')", timeout=300_000)
    assert re.search(rf"UNION \({config}\)\s+(0\.\d+|1\.0+)", page.inner_text("#scores")), page.inner_text("#scores")
    assert "The sky is made of green cheese." in page.inner_text("#attribution")  # the blame is the default's too
    page.wait_for_timeout(2000)  # the page dims its outputs until the whole update has arrived
    screenshot(page, "demo-default.png")


def test_scores_a_story_and_marks_the_sentence_that_drags_it_down(page):
    page.reload()  # a fresh page, so that the status it waits for is this story's
    page.wait_for_selector("#story textarea", timeout=60_000)
    choose(page, "roc", "fast")
    submit_story(page, STORY)
    wait_for_status(page, "Scored")
    scores = page.inner_text("#scores")
    union = re.search(r"UNION \(roc\)\s+(0\.\d+|1\.0+)", scores)
    assert union, scores
    assert 0.0 <= float(union.group(1)) <= 1.0
    if (CHECKOUT / "hub_cards" / "plot-coherence-roc" / "model.safetensors").is_file():
        assert re.search(r"Plot coherence \(roc\)\s+(0\.\d+|1\.0+)", scores), scores
    assert re.search(r"overall\s+-?\d+\.\d+", scores) and "relevance" in scores and "interestingness" in scores
    # leave-one-out: one row per sentence, each with the score without it
    attribution = page.inner_text("#attribution")
    assert "The sky is made of green cheese." in attribution
    assert len(re.findall(r"0\.\d{2,4}", attribution)) >= 5
    # the off-topic sentence is the one whose removal helps most
    cells = [line.strip() for line in attribution.splitlines() if line.strip()]
    body = cells[cells.index("change") + 1 :]  # the page shows one cell per line: #, sentence, score, change
    changes = {int(body[i]): float(body[i + 3]) for i in range(0, len(body) - 3, 4)}
    assert sorted(changes) == [1, 2, 3, 4, 5], cells
    assert max(changes, key=changes.get) == 4, attribution
    # the note wraps inside its column: the percentile sentence is there in full, and the table is no wider than the page
    assert "human-written ROCStories test stories" in scores
    box = page.locator("#scores").bounding_box()
    assert box["x"] + box["width"] <= page.viewport_size["width"], box
    assert screenshot(page, "demo-scored.png").stat().st_size > 10_000


def test_the_base_tier_is_offered_and_scores(page):
    from storyeval.checkpoints.backbones import base_backbone_installed

    if not base_backbone_installed():
        pytest.skip("the base tier's backbone is not installed")
    page.get_by_label("Base: MPNet-base").check()
    submit_story(page, STORY)
    page.wait_for_function("() => /UNION \\(roc-base\\)/.test(document.querySelector('#scores')?.innerText || '')", timeout=300_000)
    scores = page.inner_text("#scores")
    assert re.search(r"UNION \(roc-base\)\s+(0\.\d+|1\.0+)", scores), scores
    page.wait_for_timeout(2000)  # the page dims its outputs until the whole update has arrived
    screenshot(page, "demo-base.png")
    page.get_by_label("Fast: MiniLM-L6").check()


def test_a_long_story_is_scored_with_the_writingprompts_configs(page):
    long_story = " ".join([STORY.replace(" The sky is made of green cheese.", "")] * 8)  # about 200 words
    submit_story(page, long_story)
    # scored with the ROC configs, with a pointer to the WP ones (waited for by its words: "Scored." is still there)
    assert "words; the ROC configs were trained on stories of about five sentences" in wait_for_status(page, "WritingPrompts configs")
    assert not page.locator("#wp-note").is_visible()
    page.get_by_label("Long stories that open with a prompt").check()
    page.locator("#wp-note").wait_for(state="visible", timeout=30_000)
    assert "read each score for the kinds of story it was checked on" in page.inner_text("#wp-note")
    submit_story(page, long_story)
    page.wait_for_function("() => /UNION \\(wp\\)/.test(document.querySelector('#scores')?.innerText || '')", timeout=300_000)
    scores = page.inner_text("#scores")
    assert re.search(r"UNION \(wp\)\s+(0\.\d+|1\.0+)", scores) and "human-written WritingPrompts test stories" in scores, scores
    page.wait_for_timeout(2000)  # the page dims its outputs until the whole update has arrived
    screenshot(page, "demo-wp.png")
    page.get_by_label("Short stories, about five sentences").check()


def test_empty_and_huge_input_get_a_message_not_a_trace(page):
    submit_story(page, "   ")
    assert "story is empty" in wait_for_status(page, "Error")
    submit_story(page, "word " * 5000)
    message = wait_for_status(page, "characters")
    assert "at most 10,000" in message and "Traceback" not in page.content()


def test_malformed_upload_gets_a_message(page, tmp_path):
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"story": "fine."}\n{not json\n')
    upload_file(page, bad)
    message = wait_for_status(page, "Malformed")
    assert "broken.jsonl:2" in message and "not JSON" in message


def test_uploaded_file_gets_scores_and_a_distribution(page, tmp_path):
    good = tmp_path / "stories.txt"
    good.write_text(STORY + "\n" + "She sat down. She sat down. She sat down.\n")
    upload_file(page, good)
    summary = wait_for_status(page, "^\\d+ stories scored")  # anchored: Gradio's "processing" line comes first until it is done
    assert summary.startswith("2 stories scored")
    # the plot can render after the status line (seen on a loaded machine): wait for it rather than look once
    page.locator("#histogram").wait_for(state="visible", timeout=60_000)
