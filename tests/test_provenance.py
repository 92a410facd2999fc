"""Every run records the code and machine that made it: ``provenance.json``, one record per session."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import semzoo
from semzoo import resume, train
from semzoo.config import LearnerConfig, TrainConfig
from semzoo.run import provenance
from semzoo.runfiles import PROVENANCE_FILE, UNKNOWN_COMMIT, read_provenance, run_commits

SEMZOO_DIR = Path(semzoo.__file__).parent
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def tiny(out, steps: int) -> TrainConfig:
    return TrainConfig(env="matrix:climbing", algo="qmix", steps=steps, n_envs=2, sequential=True, out=str(out),
                       run_name="run", test_interval=40, test_episodes=2, log_interval=20, save_interval=20,
                       learner=LearnerConfig(batch_size=4, buffer_size=16))


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_a_run_directory_names_its_semzoo_commit_and_package_versions(tmp_path):
    run_dir, _ = train(tiny(tmp_path, 40), progress=False, tensorboard=False)
    [record] = json.loads((run_dir / PROVENANCE_FILE).read_text())["sessions"]
    assert record["env_steps"] == 0 and record["time"].endswith("+00:00")
    code = record["semzoo"]
    assert code["version"] == semzoo.__version__ and code["source"] == str(SEMZOO_DIR)
    if shutil.which("git") is not None and subprocess.run(["git", "-C", str(SEMZOO_DIR), "ls-files", "--error-unmatch",
                                                           "__init__.py"], capture_output=True).returncode == 0:
        assert code["commit"] == git(SEMZOO_DIR, "rev-parse", "HEAD") and isinstance(code["dirty"], bool)
    else:  # a wheel, or no git: said, not guessed
        assert code["commit"] == UNKNOWN_COMMIT and code["dirty"] is None
    packages = record["packages"]
    assert packages["torch"] == importlib.metadata.version("torch")
    for name in ("jax", "jaxmarl"):
        try:
            assert packages[name] == importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            assert packages[name] is None
    assert record["python"] == platform.python_version() and record["device"] == "cpu"
    assert record["cpu"] and record["cpu_count"] >= 1 and record["torch_threads"] == torch.get_num_threads()


def test_a_resumed_run_adds_a_record_and_keeps_the_earlier_ones(tmp_path, monkeypatch):
    run_dir, _ = train(tiny(tmp_path, 40), progress=False, tensorboard=False)
    first = read_provenance(run_dir)["sessions"]
    monkeypatch.setattr(provenance, "code_version", lambda: {"version": "9.9", "commit": "b" * 40, "dirty": True,
                                                             "source": "elsewhere"})
    resume(run_dir, steps=80, progress=False, tensorboard=False)
    sessions = read_provenance(run_dir)["sessions"]
    assert sessions[:1] == first and len(sessions) == 2
    assert sessions[1]["env_steps"] >= 40 and sessions[1]["semzoo"]["commit"] == "b" * 40
    assert run_commits(run_dir)[1:] == ["b" * 40 + "-dirty"]


def test_a_resume_that_fails_before_it_starts_adds_no_session(tmp_path):
    """The same run twice in a group: the second cannot take the run's lock, and the first never trained."""
    from semzoo.run.rundir import RunLockedError

    run_dir, _ = train(tiny(tmp_path, 40), progress=False, tensorboard=False)
    before = (run_dir / PROVENANCE_FILE).read_text()
    with pytest.raises(RunLockedError):
        semzoo.resume_seeds([run_dir, run_dir], steps=80, progress=False, tensorboard=False)
    assert (run_dir / PROVENANCE_FILE).read_text() == before


def test_without_git_the_commit_is_unknown_and_the_rest_is_recorded(monkeypatch):
    monkeypatch.setenv("PATH", "")  # no git to run
    assert provenance.code_version() == {"version": semzoo.__version__, "commit": UNKNOWN_COMMIT, "dirty": None,
                                         "source": str(SEMZOO_DIR)}
    assert provenance.session_record(torch.device("cpu"), 0)["packages"]["torch"] == torch.__version__


@needs_git
def test_an_install_that_its_checkout_does_not_track_has_an_unknown_commit(tmp_path):
    """A wheel installed into a virtual environment inside some repository is not that repository's code."""
    git(tmp_path, "init", "-q")
    site = tmp_path / ".venv" / "site-packages" / "semzoo"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    (tmp_path / ".gitignore").write_text(".venv/\n")
    assert provenance.code_version(site)["commit"] == UNKNOWN_COMMIT


@needs_git
def test_a_checkout_with_changes_to_tracked_files_is_dirty(tmp_path):
    package = tmp_path / "semzoo"
    package.mkdir()
    (package / "__init__.py").write_text("")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
    head = git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "notes.txt").write_text("untracked files do not count")
    assert provenance.code_version(package) | {"source": None} == {"version": semzoo.__version__, "commit": head,
                                                                   "dirty": False, "source": None}
    (package / "__init__.py").write_text("x = 1\n")
    assert provenance.code_version(package)["dirty"] is True


def test_a_run_without_a_provenance_record_names_no_commit(tmp_path):
    assert read_provenance(tmp_path) is None and run_commits(tmp_path) == []
    (tmp_path / PROVENANCE_FILE).write_text("{not json")
    assert read_provenance(tmp_path) is None
