import subprocess

from storyeval_training import model_card, provenance


def test_environment_names_the_machine_and_the_commit_it_ran_at():
    env = provenance.environment()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=provenance.CHECKOUT, capture_output=True, text=True).stdout.strip()
    assert env["commit"] == head and env["cores"] >= 1 and env["torch"] and env["gpus"] == []
    assert isinstance(env["uncommitted_changes"], list)


def test_environment_lists_new_files_except_excluded_outputs(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "out.json").write_text("{}\n")
    monkeypatch.setattr(provenance, "CHECKOUT", tmp_path)
    assert provenance.environment()["uncommitted_changes"] == ["code.py", "results/out.json"]
    assert provenance.environment(exclude=("results",))["uncommitted_changes"] == ["code.py"]


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
