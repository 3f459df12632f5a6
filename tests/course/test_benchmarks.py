"""The benchmarks still run (tiny settings; their numbers are not asserted:
timing belongs in docs/benchmarks.md, measured by the commands it names)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_benchmark(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_every_benchmark_script_imports():
    """A script no test runs still loads: what it imports from the course exists
    (a benchmark whose import broke in a move would otherwise wait for its next run)."""
    load_all = ("import runpy, sys, pathlib\n"
                "sys.path.insert(0, 'benchmarks')  # as when a script runs: its own folder first\n"
                "for path in sorted(pathlib.Path('benchmarks').glob('*.py')):\n"
                "    runpy.run_path(str(path), run_name='imported')\n"
                "    print(path.name)")
    done = subprocess.run([sys.executable, "-c", load_all], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "bench_warm_jail.py" in done.stdout.split()


@pytest.mark.long
@pytest.mark.slow
def test_training_benchmark_prints_its_table_and_saves_the_plot(tmp_path):
    plot = tmp_path / "bench.png"
    out = run_benchmark("bench_training.py", "--time-limit", "2", "--steps", "500", "--time-marks", "1",
                        "--plot", str(plot), "--threads", "1")
    for row in ("parameters", "tokens/s", "val @ 1 s", "final - floor", "step time ratio", "step pairs"):
        assert row in out
    assert plot.stat().st_size > 0


@pytest.mark.long
@pytest.mark.slow
def test_step_benchmark_compares_with_the_baseline_and_profiles_both_models():
    out = run_benchmark("bench_step.py", "--steps", "3", "--warmup", "1", "--profile", "1", "--rows", "5")
    for row in ("tinylm", "gpt2-style", "median CPU ms", "step time ratio tinylm / gpt2-style", "aten::mm"):
        assert row in out, out
    assert out.count("torch.profiler, 1 steps") == 2


@pytest.mark.long
@pytest.mark.slow
def test_step_benchmark_compiles_both_models_on_request():
    out = run_benchmark("bench_step.py", "--steps", "2", "--warmup", "1", "--compile")
    assert "AdamW fused, compiled," in out and "step time ratio tinylm / gpt2-style" in out, out


@pytest.mark.slow
def test_step_benchmark_names_the_missing_nanogpt_model(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--nanogpt", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode != 0 and f"--nanogpt {tmp_path}: no model.py there" in done.stderr


@pytest.mark.long
@pytest.mark.slow
def test_kv_cache_benchmark_checks_equal_outputs_and_prints_speed_ups():
    out = run_benchmark("bench_kv_cache.py", "--sizes", "nb06", "--lengths", "8", "24", "--repeats", "1")
    assert "speed-up" in out and out.count("x ") >= 2


@pytest.mark.long
@pytest.mark.slow
def test_compile_cost_mode_prints_both_rows():
    out = run_benchmark("bench_training.py", "--compile-cost", "12")
    assert "eager" in out and "compiled" in out and "median step ms" in out


@pytest.mark.long
@pytest.mark.slow
def test_pretrained_benchmark_prints_speed_next_to_its_bound():
    from tinylm import pretrained

    if pretrained.why_unavailable():
        pytest.skip(pretrained.why_unavailable())
    out = run_benchmark("bench_pretrained.py", "--threads", "1", "--new-tokens", "3", "--repeats", "1",
                        "--bandwidth-mib", "64")
    for row in ("first conversion", "load from the cache", "tokens/s", "bound", "decoding / bound", "peak RSS"):
        assert row in out


@pytest.mark.long
@pytest.mark.slow
def test_chat_threads_benchmark_times_one_thread_beside_the_default():
    from tinylm import pretrained

    if pretrained.why_unavailable():
        pytest.skip(pretrained.why_unavailable())
    out = run_benchmark("bench_chat_threads.py", "--rounds", "1", "--new-tokens", "3", "--repeats", "1")
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert rows and rows[0][0] == "1" and rows[0][2] == "1.00x", out  # one thread is the reference
    assert "load average" in out and "(default)" in out


@pytest.mark.long
@pytest.mark.slow
def test_autograde_setup_mode_sets_nbgraders_commands_beside_the_graders_own():
    out = run_benchmark("bench_autograde.py", "--setup", "--rounds", "1", "--assignments", "1", "--workers", "1")
    for row in ("new gradebook", "register 1 notebook(s)", "warm pool of 1: its first round took"):
        assert row in out, out


@pytest.mark.long
@pytest.mark.slow
def test_class_benchmark_grades_each_submission_in_both_modes_and_projects_the_class():
    out = run_benchmark("bench_class.py", "--notebooks", "01", "--mix", "1", "0", "1")
    # each submission once per mode, and the first once more before them (it starts the pool, untimed)
    assert out.count("every-cell 01_embeddings") == 3 and out.count("skip-tail  01_embeddings") == 2, out
    for row in ("per graded notebook", "01_embeddings", "projected on 2 idle cores", "ratio every-cell / skip-tail",
                "scores identical in both modes for every submission"):
        assert row in out, out
    assert "GRADES NOT AS EXPECTED" not in out


@pytest.mark.long
@pytest.mark.slow
def test_report_benchmark_times_every_stage():
    out = run_benchmark("bench_report.py", "--students", "20", "--repeats", "1")
    for row in ("read gradebook + results", "compute tables", "HTML + CSV + JSON", "python -m autograder report"):
        assert row in out


@pytest.mark.long
@pytest.mark.slow
def test_experiments_benchmark_times_a_cell_with_all_its_seeds():
    out = run_benchmark("bench_experiments.py", "mlp")
    assert "wall s" in out and "CPU s" in out and "stated s" in out
    [row] = [line.split() for line in out.splitlines() if line.startswith("mlp ")]
    assert row[1] == "2" and float(row[2]) > 0  # two seeds, as the notebook runs them


@pytest.mark.long
@pytest.mark.slow
def test_notebook_cells_benchmark_lists_the_cells_it_was_asked_for():
    out = run_benchmark("bench_notebook_cells.py", "01", "--min", "1000", "--grep", "tie_weights(")
    assert out.startswith("01_embeddings: ") and "code cells" in out and "check_tie_weights(tie_weights)" in out


@pytest.mark.long
@pytest.mark.slow
def test_check_time_benchmark_times_setup_and_every_test_cell_of_both_checkouts():
    out = run_benchmark("bench_check_time.py", "--notebooks", "01", "--repeat", "1", "--clock", "cpu",
                        "--baseline", str(ROOT))
    rows = [line.split() for line in out.splitlines()]
    cells = {row[1]: row[2:] for row in rows if row and row[0] == "01"}
    assert set(cells) == {"setup", "check_embed", "check_one_hot_embed", "check_tied_logits", "check_tie_weights"}
    assert all(len(times) == 6 for name, times in cells.items() if name != "setup")  # first and again: base, this, ratio
    assert "slowest test cell on its first run: 01 check_" in out and "clock cpu" in out


@pytest.mark.parametrize("name, entries", [("fresh14", 79), ("fresh15", 80), ("fresh16", 76),
                                            ("fresh17", 80), ("fresh18", 81), ("fresh19", 83),
                                            ("fresh20", 81), ("fresh21", 82), ("fresh22", 76),
                                            ("fresh23", 80), ("fresh24", 81),
                                            ("fresh25", 80), ("fresh26", 80), ("fresh27", 68),
                                            ("fresh28", 80), ("fresh29", 93), ("fresh30", 77),
                                            ("fresh31", 77), ("fresh32", 82),
                                            ("fresh33", 77), ("fresh34", 83), ("fresh35", 94)])
def test_heldout_duplicates_says_the_newest_sets_share_no_entry_with_another(name, entries):
    """heldout_duplicates compares one set's entries with every other set's, text for text, and prints only matches:
    a set written blind (fresh14 to fresh26) must hold none, so it measures mistakes no other set has."""
    out = run_benchmark("heldout_duplicates.py", "--set", name)
    assert out.strip().splitlines() == [f"0 of {entries} {name} entries are also in another set"], out[-2000:]


@pytest.mark.parametrize("name, mistakes, same", [("fresh19", 66, 17), ("fresh20", 66, 15), ("fresh21", 66, 16),
                                                  ("fresh22", 60, 16), ("fresh23", 63, 17), ("fresh24", 64, 17),
                                                  ("fresh25", 62, 18), ("fresh26", 62, 18), ("fresh27", 55, 13),
                                                  ("fresh28", 58, 22), ("fresh29", 67, 26), ("fresh30", 63, 14),
                                                  ("fresh31", 60, 17), ("fresh32", 63, 19), ("fresh33", 61, 16),
                                                  ("fresh34", 61, 22), ("fresh35", 69, 25),
                                                  ("collisions", 33, 0)])
def test_the_newest_held_out_sets_hold_real_bugs_and_edits_that_compute_the_same(name, mistakes, same):
    """verify_unseen runs the notebooks' answers and PyTorch only, no check: each mistake of the newest sets must
    change a probe and each of their SAME edits must change none (the checks' scores on them are in
    docs/benchmarks.md). The eight newest blind sets and the white-box one run here (about 20 s each); an older
    set was proved so when it arrived (`python benchmarks/verify_unseen.py --set fresh10` proves it again), and
    test_diagnostics keeps every set's mistakes failing their checks and its SAME edits passing them, which a
    mistake that stopped changing what the solution computes, or an edit that started to, would break."""
    out = run_benchmark("verify_unseen.py", "--set", name)
    assert f"{mistakes} mutations, {mistakes} apply and change a probe" in out, out[-2000:]
    assert out.count("same as the solution") == same, out[-2000:]
