"""python -m tinylm train | sample | eval, run in-process (and once as a real process)."""
import subprocess
import sys

import pytest
import torch

from tinylm.__main__ import main


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "story.txt"
    path.write_text("The owl sat in the oak and hooted at the moon. " * 80, encoding="utf-8")
    return path


def test_train_sample_eval_on_a_text_file(tmp_path, text_file, capsys):
    ckpt = tmp_path / "ckpt" / "m.pt"
    assert main(["train", "--preset", "tiny", "--text", str(text_file), "--steps", "6",
                 "--seq-len", "40", "--eval-every", "3", "--out", str(ckpt), "--quiet",
                 "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "trained 6 steps" in out and ckpt.exists() and "uniform" in out
    assert torch.load(ckpt, weights_only=True)["step"] == 6

    assert main(["sample", "--checkpoint", str(ckpt), "--prompt", "The owl", "--max-new-tokens",
                 "12", "--temperature", "0", "--device", "cpu"]) == 0
    sample = capsys.readouterr().out
    assert sample.startswith("The owl") and len(sample.encode()) >= len("The owl") + 1

    assert main(["eval", "--checkpoint", str(ckpt), "--text", str(text_file), "--device", "cpu"]) == 0
    report = capsys.readouterr().out
    assert "perplexity" in report and "bits/byte" in report and "bigram" in report


def test_resume_continues_to_the_saved_step_count(tmp_path, text_file, capsys):
    ckpt = tmp_path / "m.pt"
    common = ["--preset", "tiny", "--text", str(text_file), "--seq-len", "40", "--out", str(ckpt),
              "--quiet", "--device", "cpu", "--eval-every", "0"]
    assert main(["train", "--steps", "8", "--time-limit", "0.0001", *common]) == 0
    assert torch.load(ckpt, weights_only=True)["step"] == 1  # stopped by the time limit
    assert main(["train", "--resume", *common]) == 0
    assert torch.load(ckpt, weights_only=True)["step"] == 8
    assert "trained 8 steps" in capsys.readouterr().out
    assert main(["train", "--resume", "--steps", "11", *common]) == 0  # an option given with --resume wins
    assert torch.load(ckpt, weights_only=True)["step"] == 11
    assert main(["train", "--resume", "--steps", "5", *common]) == 2
    assert "fewer than the 11 steps already done" in capsys.readouterr().err


def test_errors_are_one_line_not_tracebacks(tmp_path, capsys):
    assert main(["sample", "--checkpoint", str(tmp_path / "none.pt")]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    assert main(["train", "--text", str(tmp_path / "missing.txt"), "--quiet"]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fly"])  # argparse: unknown command


@pytest.mark.slow
def test_module_runs_as_a_program(tmp_path, text_file):
    ckpt = tmp_path / "m.pt"
    run = lambda *a: subprocess.run([sys.executable, "-m", "tinylm", *a], capture_output=True,
                                    text=True, timeout=120)
    result = run("train", "--preset", "tiny", "--text", str(text_file), "--steps", "2",
                 "--seq-len", "32", "--out", str(ckpt), "--quiet", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    result = run("sample", "--checkpoint", str(ckpt), "--max-new-tokens", "5", "--device", "cpu")
    assert result.returncode == 0 and result.stdout.startswith("Once upon a time")


def test_experiment_help_describes_every_experiment_and_option(capsys):
    from tinylm.experiments import EXPERIMENTS

    with pytest.raises(SystemExit):
        main(["experiment", "--help"])
    text = capsys.readouterr().out
    listing = text.split("\nexperiments:\n")[1].split("positional arguments")[0]
    for name, (run, _) in EXPERIMENTS.items():
        line = next((l for l in listing.splitlines() if l.split()[:1] == [name]), "")
        assert run.__doc__.split()[0] in line, (name, line)       # its description, from its own docstring
    for option in ("--steps", "--seed", "--out", "--text"):
        help_line = next(l for l in text.splitlines() if l.strip().startswith(option))
        assert len(help_line.split()) > 2, help_line                  # more than the bare option and its metavar
