import os
import platform
import subprocess

import torch

from storyeval_training.export import model_card, provenance


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=provenance.CHECKOUT, capture_output=True, text=True).stdout


def test_environment_names_the_machine_and_the_commit_it_ran_at():
    env = provenance.environment()
    assert env["commit"] == git("rev-parse", "--short", "HEAD").strip()
    assert (env["cores"], env["python"], env["torch"]) == (os.cpu_count(), platform.python_version(), torch.__version__)
    # the GPUs this process sees, on a CPU machine or a CUDA one
    assert env["gpus"] == [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    # the checkout's changes as git status lists them: modified, staged, deleted and untracked files
    entries = git("status", "--porcelain", "-z", "--untracked-files=all").split("\0")
    changed, skip = set(), False
    for entry in entries:
        if skip or not entry:  # a rename's second field is its old path
            skip = False
            continue
        changed.add(entry[3:])
        skip = entry[0] in "RC"
    assert env["uncommitted_changes"] == sorted(changed)


def test_environment_lists_new_files_except_excluded_outputs(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "out.json").write_text("{}\n")
    monkeypatch.setattr(provenance, "CHECKOUT", tmp_path)
    assert provenance.environment()["uncommitted_changes"] == ["code.py", "results/out.json"]
    assert provenance.environment(exclude=("results",))["uncommitted_changes"] == ["code.py"]


def test_a_run_importing_the_runtime_from_another_checkout_records_its_commit_too(tmp_path, monkeypatch):
    """`python -m storyeval_training...` from another worktree takes storyeval from there: both commits are recorded."""
    assert "runtime_checkout" not in provenance.environment()  # this test session imports both from one checkout
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "storyeval").mkdir()
    (tmp_path / "storyeval" / "__init__.py").write_text("")
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], check=True)
    monkeypatch.setattr(provenance, "RUNTIME", tmp_path / "storyeval")
    env = provenance.environment()
    worktree_commit = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert env["runtime_checkout"] == str(tmp_path) and env["runtime_commit"] == worktree_commit
    assert env["commit"] == git("rev-parse", "--short", "HEAD").strip()


def test_environment_outside_a_repository_records_no_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "CHECKOUT", tmp_path)  # not a git repository
    env = provenance.environment()
    assert env["commit"] == "" and env["uncommitted_changes"] == []


def test_card_says_where_the_run_trained():
    cpu = {"cores": 2, "cpu": "AMD EPYC", "gpus": [], "commit": "abc1234", "uncommitted_changes": []}
    assert model_card._machine_text({"environment": cpu}) == "a 2-core CPU (AMD EPYC), code at commit abc1234"
    gpu = {**cpu, "gpus": ["NVIDIA A100", "NVIDIA A100"], "uncommitted_changes": ["x.py"]}
    assert model_card._machine_text({"environment": gpu}) == "2 x NVIDIA A100, code at commit abc1234 with uncommitted changes"
    # results from before the loops recorded their environment: the project's machine
    assert model_card._machine_text({}) == "a 2-core CPU machine"


def test_source_hash_follows_the_code(tmp_path):
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    first.write_text("x = 1\n")
    second.write_text("y = 2\n")
    before = provenance.source_hash([first, second])
    assert provenance.source_hash([second, first]) == before  # order-free
    first.write_text("x = 3\n")
    assert provenance.source_hash([first, second]) != before


def test_prepared_stories_and_negatives_are_cached_under_their_code(tmp_path, monkeypatch):
    # `datasets` keys neither a builder class's cache nor map(make_pairs) by the code they run
    from datasets.fingerprint import Hasher

    from storyeval_training.data.builders import BUILDERS
    from storyeval_training.data.builders.common import BUILDERS_CODE
    from storyeval_training.data.negatives import sampler as sampler_module
    from storyeval_training.data.negatives.substitution import KeywordLexicon

    builder = BUILDERS["roc"](cache_dir=str(tmp_path), data_dir=str(tmp_path))
    assert BUILDERS_CODE in builder.cache_dir
    negative_sampler = sampler_module.NegativeSampler(KeywordLexicon({}, frozenset()), [], seed=1)
    before = Hasher.hash(negative_sampler)
    negative_sampler.code_version = "edited"
    assert Hasher.hash(negative_sampler) != before
