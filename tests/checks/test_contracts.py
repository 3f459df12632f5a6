"""The checks as a learner meets them. Each class of missed or
misnamed mistake has its tests here: the mistakes of benchmarks/mutations
marked added="learner-reports" (written after learners' reports) must be named (they were missed or named wrongly
before), plus the properties behind them: notebook 05's modules checked in
the cached and grouped regimes, later notebooks' comparisons traced back to
the notebook that owns a bug, the inputs-unchanged and dtype-kept
contracts, measured facts that are true, bounded generation checks, and the
exercise texts naming what the exercise needs."""
from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest
import torch

import tinylm
from autograder.checks import CheckFailed, check_causal_mask
from autograder.checks import contracts
from autograder.checks.contracts import call_keeping_inputs
from autograder.checks.core import Check
from autograder.course import NOTEBOOK_SOURCES

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_diagnostics  # noqa: E402
from benchmarks.mutations import all_mutations  # noqa: E402

ADDED = [(nb, m) for nb, ms in sorted(all_mutations().items()) for m in ms if m.added == "learner-reports"]


def test_the_learner_report_mistakes_exist_in_every_class():
    whys = " | ".join(m.why for _, m in ADDED)
    for mistake in ("start_pos", "n_heads heads", "layer index", "cache to the blocks", "in place",
                    "does not cast", "plain Python list", "not the values", "after the top-k/top-p", "never reached"):
        assert mistake in whys, mistake


@pytest.mark.parametrize("notebook, mutation", ADDED, ids=[f"{nb}-{m.cell}-{m.why[:40]}" for nb, m in ADDED])
def test_a_learner_report_mistake_is_named(notebook, mutation):
    outcome = bench_diagnostics.run_mutation(notebook, mutation, bench_diagnostics.notebook_cells(notebook))
    assert outcome.verdict == "named", f"{outcome.verdict}: {outcome.last_line}"


# -- contracts -------------------------------------------------------------------
def test_an_input_changed_in_place_fails_its_row_and_names_the_argument():
    chk = Check("centre", expects="a tensor")
    x = torch.arange(6.0).view(2, 3)
    call_keeping_inputs(chk, lambda t: t.sub_(t.mean(-1, keepdim=True)), x)
    row = next(r for r in chk.rows if r.name == "inputs unchanged")
    assert not row.ok and "`t` in place" in chk.diagnoses[0]  # the learner's own name for the argument
    assert torch.equal(x, torch.arange(6.0).view(2, 3))  # given back: the check goes on reading the caller's input


def test_an_untouched_input_passes_the_row():
    chk = Check("centre", expects="a tensor")
    call_keeping_inputs(chk, lambda t: t - t.mean(-1, keepdim=True), torch.arange(6.0).view(2, 3))
    assert chk.passed and [r.name for r in chk.rows] == ["inputs unchanged"]


def test_a_result_that_is_the_changed_input_is_measured_as_returned():
    """An in-place operation that returns its input (`masked_fill_`): giving the
    input its values back must not change what the learner's function returned."""
    chk = Check("mask", expects="a tensor")
    x = torch.arange(6.0).view(2, 3)
    got = call_keeping_inputs(chk, lambda t: t.masked_fill_(t > 2, 0.0), x)
    assert got.tolist() == [[0.0, 1.0, 2.0], [0.0, 0.0, 0.0]]  # what the function returned
    assert torch.equal(x, torch.arange(6.0).view(2, 3))  # the caller's input given back all the same
    pair = call_keeping_inputs(Check("halves", expects="a tuple"), lambda t: (t.mul_(0.5), t[:1]), x)
    assert pair[0].tolist() == [[0.0, 0.5, 1.0], [1.5, 2.0, 2.5]] and pair[1].tolist() == [[0.0, 0.5, 1.0]]
    assert torch.equal(x, torch.arange(6.0).view(2, 3))


def test_a_right_rms_norm_that_writes_into_x_fails_only_the_inputs_row():
    from autograder.checks import check_rms_norm

    def rms_norm(x, weight, eps=1e-6):  # right values, computed in x's own memory and returned from it
        if x.dtype != torch.float32:
            return weight * (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
        return x.mul_(torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)).mul_(weight)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(CheckFailed) as err:
        check_rms_norm(rms_norm)
    text = str(err.value)
    assert "failed 1 of 4 checks: inputs unchanged." in text, text  # before: the value rows failed too
    assert "eps is ignored" not in text, text  # the probes measure the function, not the input it overwrote


def test_every_probe_reads_the_input_it_was_given():
    """A probe that the learner's code writes into is given its input back, so
    a fit over several probes reads the learner's function, not their writes."""
    from autograder.checks import check_rms_norm

    def rms_norm(x, weight, eps=1e-6):  # eps² where eps belongs, and x overwritten
        x /= torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps ** 2)
        return weight * x
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(CheckFailed) as err:
        check_rms_norm(rms_norm)
    text = str(err.value)
    assert "effective eps is 1e-4 = eps²" in text, text
    assert "effective eps (fitted" not in text, text  # before: "your effective eps ... is 1", read off overwritten x


# -- measured facts are true --------------------------------------------------------
def test_a_float_mask_of_the_right_pattern_gets_no_false_diagonal():
    def float_mask(q_len, kv_len):
        return torch.ones(q_len, kv_len).tril(diagonal=kv_len - q_len)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(CheckFailed) as err:
        check_causal_mask(float_mask)
    said = err.value.diagnosis.facts + err.value.diagnosis.likely_bugs  # the check's words, not the learner's quoted line
    assert not any("tril(diagonal=" in line for line in said)
    assert any("bool" in line for line in said)


# -- later notebooks' comparisons name the owner ----------------------------------------
def _solution_cell(notebook: str, gid: str) -> str:
    return bench_diagnostics.notebook_cells(notebook)[1][gid]


def _save_decoder(folder: Path, source: str) -> None:
    """Save notebook 05's decoder cell as if its check had passed (a learner's mylm/ from before this check)."""
    from autograder.checks import answers
    ns = {"__name__": "__main__"}
    setup, cells, _ = bench_diagnostics.notebook_cells("05")
    with contextlib.redirect_stdout(io.StringIO()):
        for src in setup:
            exec(src, ns)
        exec(cells["swiglu"], ns)
        exec(source, ns)
    answers.save_cell(folder, "nb05_swiglu", cells["swiglu"], ["swiglu"], ns)  # a correct swiglu of the learner's
    answers.save_cell(folder, "nb05_swiglu", source, ["Transformer", "Attention", "Block"], ns)


@pytest.fixture
def mylm(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYLM_MYLM", str(tmp_path / "mylm"))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    return tmp_path / "mylm"


def _cached_check(model, ids):
    from autograder.checks.learner_model import cached_matches_full, check_model_agrees
    with contextlib.redirect_stdout(io.StringIO()) as out:
        check_model_agrees("cached logits equal the full recompute", lambda m: cached_matches_full(m, ids), model)
    return out.getvalue()


def test_a_saved_decoder_that_ignores_start_pos_is_traced_back_to_notebook_05(mylm):
    from autograder.checks.learner_model import learner_model
    good = _solution_cell("05", "Transformer")
    bad = good.replace("q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)",
                       "q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)")
    assert bad != good
    _save_decoder(mylm, bad)
    cfg = tinylm.ModelConfig(d_model=32, n_layers=2, n_heads=4, max_seq_len=32)
    with contextlib.redirect_stdout(io.StringIO()):
        model = learner_model(cfg).eval()
    assert type(model).__module__ == "mylm.nb05_swiglu"
    ids = torch.randint(256, (2, 9), generator=torch.Generator().manual_seed(0))
    with pytest.raises(CheckFailed) as err:
        _cached_check(model, ids)
    message = str(err.value)
    assert "notebook-05 decoder" in message and "Fix it in 05" in message
    assert "start_pos" in message  # notebook 05's own check, run again on the saved answer, names the bug


def test_a_correct_saved_decoder_passes_the_cached_comparison(mylm):
    from autograder.checks.learner_model import learner_model
    _save_decoder(mylm, _solution_cell("05", "Transformer"))
    cfg = tinylm.ModelConfig(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=32)
    with contextlib.redirect_stdout(io.StringIO()):
        model = learner_model(cfg).eval()
    ids = torch.randint(256, (1, 7), generator=torch.Generator().manual_seed(1))
    assert "cached logits equal the full recompute: True" in _cached_check(model, ids)


def _sources() -> dict[str, str]:
    return {p.stem[:2]: p.read_text() for p in sorted(Path(NOTEBOOK_SOURCES).glob("[0-9][0-9]_*.py"))}


def test_no_comparison_of_a_learners_answer_is_a_bare_print():
    """A cell that compares the learner's code with tinylm must be a check (require_agreement or
    check_model_agrees), so a False names its owner instead of scrolling past."""
    bare = re.compile(r"^print\(.*\byours?\b.*(torch\.allclose|torch\.equal)\(", re.M)
    for nb in ("02", "03", "04", "05", "06"):
        source = _sources()[nb]
        assert not bare.findall(source), nb
        assert "require_agreement(" in source or "check_model_agrees(" in source, nb


# -- the 06 timing cells --------------------------------------------------------------
def test_the_06_timing_cells_are_sized_by_work_and_say_when_they_are_too_noisy():
    source = _sources()["06"]
    assert source.count("too noisy on this machine to tell") == 3  # the two toy models' cells and SmolLM2's
    assert "positions = [16, 64, 128, 256]" in source and "1023" not in source
    assert "max_seq_len=48" in source  # 16-token prompt + 32 new tokens, whatever the machine


# -- texts ---------------------------------------------------------------------------------
def test_notebook_05_names_every_config_field_its_answer_cell_reads():
    source = _sources()["05"]
    cell = _solution_cell("05", "Transformer")
    answer = "".join(re.findall(r"### BEGIN SOLUTION(.*?)### END SOLUTION", cell, re.S))  # what the learner writes
    assert answer
    text = source[:source.index("class Attention(nn.Module):")]
    for field in sorted(set(re.findall(r"config\.(\w+)", answer))):
        assert f"config.{field}" in text, field


def test_04_says_the_new_key_is_rotated_too_and_03_says_where_the_mask_lives():
    assert "only the new query is rotated" not in _sources()["04"]
    assert "new key" in _sources()["04"]
    assert ".to(q.device)" in _sources()["03"].split("## 4. Attention with the mask")[1].split("# %%")[0]


# -- the held-out set's classes (benchmarks/mutations/heldout.py), each with a mistake of the class that is not
#    the held-out one: the check must name it from a measurement
from benchmarks.mutations import Mutation  # noqa: E402


def _named(notebook: str, mutation: Mutation) -> str:
    outcome = bench_diagnostics.run_mutation(notebook, mutation, bench_diagnostics.notebook_cells(notebook))
    assert outcome.verdict == "named", f"{outcome.verdict}: {outcome.message}"
    return outcome.message


CLASS_MISTAKES = [
    ("05", Mutation("Transformer", "self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))",
                    "only = Block(config)\n        self.blocks = nn.ModuleList(only for _ in range(config.n_layers))",
                    ("the same module",), "one Block object listed n_layers times by a generator")),
    ("05", Mutation("Transformer", "self.v_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)",
                    "self.v_proj = self.k_proj", ("the same module",), "one Linear for the keys and the values")),
    ("05", Mutation("Transformer", "x = block(x, self.rope_cos, self.rope_sin, cache, i)",
                    "x = block(x, self.rope_cos, self.rope_sin, cache, 0)",
                    ("cache slots",), "every block gets layer index 0")),
    ("05", Mutation("Transformer", "y = causal_attention(q, k, v)",
                    "y = causal_attention(q, k, v.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1))",
                    ("keys are not repeated",), "values repeated to the query heads, keys not")),
    ("05", Mutation("Transformer", "y = causal_attention(q, k, v)",
                    "n_rep = self.n_heads // self.n_kv_heads\n        "
                    "y = causal_attention(q, torch.cat([k] * n_rep, dim=1), torch.cat([v] * n_rep, dim=1))",
                    ("tiling",), "kv heads tiled with torch.cat")),
    ("06", Mutation("generate_greedy", "idx, step_input = prompt, prompt", "idx, step_input = prompt, prompt[:, -2:]",
                    ("prefill the whole prompt",), "prefills with the last two prompt tokens")),
    ("06", Mutation("attention_step", "tinylm.causal_mask(T, start + T).to(x.device)",
                    "torch.where(tinylm.causal_mask(T, start + T), 1.0, 0.0).to(x.device)",
                    ("0/1 floats",), "a 0/1 float mask built with torch.where")),
    ("07", Mutation("gqa_step", "repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep)", "k_all, repeat_kv(v_all, n_rep)",
                    ("keys are not repeated",), "values repeated, keys not")),
    ("02", Mutation("RMSNorm", "return rms_norm(x, self.weight, self.eps)",
                    "return rms_norm(x, self.weight.float(), self.eps)",
                    ("torch.float32, expected torch.bfloat16",), "the gain upcast: a bf16 module returns float32")),
]


@pytest.mark.parametrize("notebook, mutation", CLASS_MISTAKES, ids=[f"{nb}-{m.why[:40]}" for nb, m in CLASS_MISTAKES])
def test_a_mistake_of_a_held_out_class_is_named(notebook, mutation):
    _named(notebook, mutation)


def test_shared_parts_are_measured_and_a_tied_head_is_not_sharing():
    from torch import nn

    from autograder.checks.model import _shared_modules

    class Pair(nn.Module):
        def __init__(self, share):
            super().__init__()
            self.first = nn.Linear(3, 3)
            self.second = self.first if share else nn.Linear(3, 3)

    assert "`first` and `second` are the same module" in _shared_modules(Pair(True), Pair(False))
    assert _shared_modules(Pair(True), Pair(True)) is None  # shared in the reference too (a tied head): fine
    assert _shared_modules(Pair(False), Pair(False)) is None


def test_the_attention_spy_names_the_unrepeated_one_and_restores_sdpa():
    import torch.nn.functional as F

    from autograder.checks.spies import attention_heads, unrepeated_bug

    q, kv = torch.zeros(1, 4, 3, 2), torch.zeros(1, 2, 3, 2)

    def keys_only(q, k, v):
        return F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v)
    original = F.scaled_dot_product_attention
    heads = attention_heads(keys_only, lambda: keys_only(q, kv, kv))
    assert heads == (4, 4, 2) and "values are not repeated" in unrepeated_bug(heads)
    assert F.scaled_dot_product_attention is original
    assert unrepeated_bug((4, 2, 2)) is None and unrepeated_bug(None) is None


def test_temperature_after_the_filters_is_not_blamed_on_the_crossing_token():
    from autograder.checks import check_sample_next
    from autograder.checks.sampling import ref_top_k, ref_top_p

    def filters_then_temperature(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        if temperature == 0:
            return logits.argmax(-1)
        z = ref_top_k(logits, top_k) if top_k is not None else logits
        z = ref_top_p(z, top_p) if top_p is not None else z
        return torch.multinomial((z / temperature).softmax(-1), 1, generator=generator).squeeze(-1)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(CheckFailed) as err:
        check_sample_next(filters_then_temperature)
    assert "after top-k/top-p filtering" in str(err.value) and "crossing" not in str(err.value)


def test_half_precision_nll_fails_against_the_float64_reference():
    import torch.nn.functional as F

    from autograder.checks import check_nll_sum_and_count

    def in_half(logits, targets, ignore_index=-100):  # log-softmax and the sum both in the logits' dtype
        logp = logits.log_softmax(-1).gather(-1, targets.clamp_min(0)[..., None])[..., 0]
        keep = targets != ignore_index
        return float(-(logp * keep).sum()), int(keep.sum())

    def in_float(logits, targets, ignore_index=-100):
        nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index, reduction="sum")
        return nll.item(), int((targets != ignore_index).sum())
    with contextlib.redirect_stdout(io.StringIO()):
        check_nll_sum_and_count(in_float)
        with pytest.raises(CheckFailed, match="bfloat16 logits"):
            check_nll_sum_and_count(in_half)


def test_the_one_hot_width_is_named_only_from_an_error_that_shows_it():
    import torch.nn.functional as F

    from autograder.checks import check_embed

    def default_width(ids, weight):
        return F.one_hot(ids).to(weight.dtype) @ weight

    def unrelated_index_error(ids, weight):
        if int(ids.max()) < weight.shape[0] - 1:
            raise IndexError("list index out of range")
        return weight[ids]
    with contextlib.redirect_stdout(io.StringIO()):
        with pytest.raises(CheckFailed, match="one-hot width came from the ids"):
            check_embed(default_width)
        with pytest.raises(CheckFailed) as err:
            check_embed(unrelated_index_error)
    assert "one-hot" not in str(err.value)


def test_the_09_and_10_agreements_are_checks():
    sources = _sources()
    assert 'check_model_agrees("reloaded model gives identical logits"' in sources["09"]
    for label in ("tinylm.evaluate agrees", "batches of 1, 2, 3, ... windows instead of 16 give the same loss"):
        assert f'require_agreement("{label}"' in sources["10"]
    assert 'check_model_agrees("LlamaForCausalLM gives the same logits"' in sources["10"]
    assert not re.search(r"^\s*print\(.*(agrees|same logits|identical logits)", sources["09"] + sources["10"], re.M)


def test_a_state_dict_round_trip_sees_weights_outside_the_state_dict():
    from torch import nn

    from autograder.checks.learner_model import reload_gives_same_logits

    class Hidden(nn.Module):
        def __init__(self, register):
            super().__init__()
            self.parts = nn.ModuleList([nn.Linear(4, 4)]) if register else [nn.Linear(4, 4)]

        def forward(self, x):
            return self.parts[0](x)

    x = torch.randn(2, 4)
    assert reload_gives_same_logits(Hidden(True), x)
    assert not reload_gives_same_logits(Hidden(False), x)


def _one_hot_rows(ids, weight):
    return torch.nn.functional.one_hot(ids, weight.shape[0]).to(weight.dtype) @ weight


_ONE_HOT = contracts.Contract("rows", _one_hot_rows, lambda: [("ids", (torch.tensor([[0, 2], [1, 3]]), torch.randn(4, 3)),
                                                                       {})], names=("ids", "weight"), batch=("ids",),
                             dtypes=())


def test_a_result_left_on_the_cpu_fails_on_the_meta_device():
    """torch.eye indexed by meta ids comes back on the CPU without raising; the reference's result stays on meta."""
    chk = Check("rows", expects="a tensor")
    contracts.run_contract(chk, lambda ids, weight: torch.eye(weight.shape[0], dtype=weight.dtype)[ids] @ weight, _ONE_HOT)
    assert chk.regime["name"] == contracts.elsewhere_regime()
    assert contracts.on_a_gpu() or any("your result is on cpu for inputs on the meta device" in f for f in chk.facts)
    right = Check("rows", expects="a tensor")
    contracts.run_contract(right, lambda ids, weight: torch.eye(weight.shape[0], dtype=weight.dtype,
                                                                device=ids.device)[ids] @ weight, _ONE_HOT)
    assert right.passed


def test_a_regime_that_changes_torch_settings_names_them():
    """Right values, but float64 inputs switch the default dtype for the whole process: the grid names it."""
    def follows_the_input(ids, weight):
        if weight.dtype == torch.float64:
            torch.set_default_dtype(weight.dtype)
        return _one_hot_rows(ids, weight)
    contract = contracts.Contract("rows", _one_hot_rows, _ONE_HOT.cases, names=("ids", "weight"), dtypes=(torch.float64,))
    chk = Check("rows", expects="a tensor")
    contracts.run_contract(chk, follows_the_input, contract)
    assert torch.get_default_dtype() == torch.float32
    assert chk.regime["name"] == "float64" and any("default dtype at float64" in b for b in chk.diagnoses)


def _noisy_rows(x, generator):
    return x + torch.randn(x.shape, generator=generator, dtype=x.dtype)


_DRAWS = contracts.Contract("noisy_rows", _noisy_rows, lambda: [("x", (torch.arange(12.0).view(3, 4),
                                                                        torch.Generator().manual_seed(1)), {})],
                            names=("x", "generator"), batch=("x",), dtypes=(torch.float64,))


def test_the_learner_draws_from_the_state_the_reference_drew_from():
    """Every regime hands the reference and then the learner one generator: the learner starts where the reference did."""
    chk = Check("noisy_rows", expects="a tensor")
    contracts.run_contract(chk, _noisy_rows, _DRAWS)
    assert chk.passed and {"regime: batch of 1", "regime: float64"} <= {r.name for r in chk.rows}


_SEEDED = contracts.Contract("seeded_rows", _noisy_rows, _DRAWS.cases, names=("x", "generator"), dtypes=(),
                             generator="generator", locate=False, elsewhere=False)


def _callers_generator_regime(contract):
    _, named, _ = contracts.split_case(contract, contract.cases()[0])
    (regime,) = [r for r in contracts.regimes(contract, named) if r.name == "draws from the caller's generator only"]
    return regime, named


def test_a_draw_from_the_callers_generator_alone_passes_the_generator_regime():
    chk = Check("seeded_rows", expects="a tensor")
    contracts.run_contract(chk, _noisy_rows, _SEEDED)
    assert chk.passed and "regime: draws from the caller's generator only" in {r.name for r in chk.rows}


def test_a_generator_seeded_from_the_callers_is_told_apart_from_drawing_from_it():
    """Seeded from the caller's seed, the results follow the seed (the two seed regimes pass), but the caller's
    generator never moves: two calls with it give the same noise."""
    def own_generator(x, generator):
        if generator is not None:
            generator = torch.Generator().manual_seed(generator.initial_seed())
        return _noisy_rows(x, generator)
    chk = Check("seeded_rows", expects="a tensor")
    contracts.run_contract(chk, own_generator, _SEEDED)
    assert chk.regime["name"] == "draws from the caller's generator only"
    assert any("never draws from the generator it is given" in b and "a second call with the same generator gives "
               "the same result" in b for b in chk.diagnoses)
    assert not any("global generator" in b for b in chk.diagnoses)


def test_reseeding_the_global_generator_is_measured_and_the_probe_gives_its_state_back():
    def reseeds(x, generator):
        if generator is not None:
            torch.manual_seed(generator.initial_seed())
        return x + torch.randn(x.shape, dtype=x.dtype)
    regime, named = _callers_generator_regime(_SEEDED)
    torch.manual_seed(5)
    before = torch.get_rng_state()
    found = regime.judge(reseeds, _SEEDED, named)
    assert torch.equal(torch.get_rng_state(), before)
    assert any("changes the state of torch's global generator" in b for b in found["bugs"])
    # reseeded alike at each call, the global stream repeats its draws: the second call's noise is the first's
    assert any("never draws from the generator it is given" in b and "same result" in b for b in found["bugs"])


def test_no_device_regime_for_inputs_the_course_keeps_on_the_cpu():
    """A generator cannot move, and an exercise marked elsewhere=False (corpus bytes) is right on the CPU only."""
    x = torch.arange(12.0).view(3, 4)
    assert not any(r.device or r.judge is contracts.stays_on_device
                   for r in contracts.regimes(_DRAWS, {"x": x, "generator": torch.Generator()}))
    kept = contracts.Contract("rows", _one_hot_rows, _ONE_HOT.cases, names=("ids", "weight"), elsewhere=False)
    ids, weight = torch.tensor([2, 0]), torch.randn(4, 3)
    assert not any(r.device or r.judge is contracts.stays_on_device
                   for r in contracts.regimes(kept, {"ids": ids, "weight": weight}))
    moved = contracts.regimes(_ONE_HOT, {"ids": ids, "weight": weight})
    assert any(r.device or r.judge is contracts.stays_on_device for r in moved)


def test_no_exercise_random_by_contract_or_on_corpus_bytes_gets_a_device_regime():
    """get_batch draws its windows at random (only the generator's promises are judged) and bigram_nll counts corpus
    bytes, both on the CPU in the course: a GPU present must not fail a right answer of either."""
    from autograder.checks.perplexity_bigram import BIGRAM_NLL
    from autograder.checks.training import GET_BATCH
    for contract in (GET_BATCH, BIGRAM_NLL):
        _, named, _ = contracts.split_case(contract, contract.cases()[0])
        assert not any(r.device or r.judge is contracts.stays_on_device for r in contracts.regimes(contract, named))


def test_a_loss_that_depends_on_the_batching_fails_the_batching_row():
    """The regrouped loss is compared with the learner's own first loss: per-batch
    means averaged give the right loss for one batch, and differ from themselves."""
    import math

    import torch.nn.functional as F

    from autograder.checks import check_evaluate

    def evaluate(model, batches, bytes_per_token=1.0):
        was = model.training
        model.eval()
        with torch.no_grad():
            means = [F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100).item() for x, y in batches]
        model.train(was)
        loss = sum(means) / len(means)
        return {"loss": loss, "perplexity": math.exp(loss), "bits_per_byte": loss / math.log(2) / bytes_per_token}
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(CheckFailed) as err:
        check_evaluate(evaluate)
    summary = str(err.value).splitlines()[0]
    assert "same loss when the same rows are batched differently" in summary, summary  # before: that row passed


def test_a_measurement_gives_back_the_batches_it_was_handed():
    """A measuring call (bytes per token at 1, 2, 4) on batches a learner's evaluate writes into: each call reads
    the caller's batches as they were, and what the call returned is kept."""
    from autograder.checks.core import measuring_call

    def evaluate(model, batches, per):
        for _, y in batches:
            y[y < 0] = 0  # the padding made a class, in the caller's tensors
        return float(sum(int(y.sum()) for _, y in batches)) / per
    batches = [(torch.zeros(2), torch.tensor([3, -100])), (torch.zeros(1), torch.tensor([-100]))]
    assert [measuring_call(evaluate, (None, batches, per)) for per in (1.0, 2.0)] == [3.0, 1.5]
    assert [y.tolist() for _, y in batches] == [[3, -100], [-100]]
