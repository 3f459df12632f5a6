"""Checks for the accounting exercises: what the model costs, predicted by
the learner from its config, held against a measurement of a built model.

Every reference is a measurement, never a formula: parameters are
`p.numel()` of tinylm's Transformer built on the meta device (shapes only, no
memory, so Llama 3 8B costs nothing); FLOPs are what
torch.utils.flop_counter.FlopCounterMode counts while the computation runs on
the meta device, with attention's matmuls written out (QKᵀ over the full
T × T, the masked half included: that is what the matmul computes, and what
the counter counts); bytes are `nbytes` of the tensors a KV cache allocates,
or of the parameters, gradients and AdamW moments after an optimizer step
(on the meta device too; tests/checks/test_accounting.py holds each measurement to
an independent one: transformers' Llama, its cache, a real step).

A learner's value is compared exactly. Where it is wrong, the check measures
how: the ratio or the difference to the measurement, per component, named
in the config's terms ("attention: 2·n_layers·d_model·(n_heads − n_kv_heads)·
head_dim too many"), and a known mistake is named only when it explains
every failing case of that component. Beyond the known mistakes, a wrong
count is read as its measurement with one named part left out, counted once
more or scaled by a factor the situation names (parts_apart: the parts
measured from the model, the parameters no matmul multiplies, the norm gains,
the vocabulary matrices, each parameter of a block; one FLOP per output
element of each matmul), named only when every failing case reads it alike.
"""
from __future__ import annotations

import dataclasses
import functools
from fractions import Fraction
from typing import Any, Callable

import torch
import torch.nn.functional as F
import tinylm
from tinylm.presets import LLAMA3_8B, SMOLLM2_135M

from .framework.check import Check, Row
from .accounting_measure import (COMPONENTS, initialisers_skipped, adamw_step_state, config_parameters, flop_count,
                                 kv_cache_nbytes, meta_model, train_step_flops)
from .accounting_reading import (Findings, IN_NUMBERS, joined, Part, difference_words, finish_findings, ratio_words, read_int,
                                 run_cases, explanations, matmuls_seen, parameter_parts, parts_apart, positions_counted,
                                 refuted, role_components, roles_apart, multiplied_roles, parameter_roles, config_sizes)

# The measurements and readings the notebooks and tests take from this module by name.
from .accounting_measure import (after_one_adamw_step, block_flops, measure_parameters,  # noqa: F401
                                 saved_activation_bytes, training_state_nbytes)


# ---------------------------------------------------------------------------
# every config-sized count: head_dim recomputed from d_model

def say_head_dim_quotient(chk: Check, fn, findings: Findings, build_want: Callable[[tuple], Any]) -> None:
    """A component wrong only for configs that set head_dim apart from
    d_model // n_heads, and there exactly the measurement of the same model
    with head_dim = d_model // n_heads: the learner's function is called again
    with that head_dim (the case's other arguments unchanged), and when it
    returns the same count, right there, the cause is confirmed on its own
    code and said in place of that component's other lines. build_want(case)
    is the measurement (an int, or a dict per component); the config is the
    case's first argument."""
    confirmed: dict[str, list[str]] = {}  # where it was measured -> the components it explains
    for key, failures in list(findings.failures.items()):
        said = []
        for label, case, got in failures:
            config = case[0]
            quotient = config.d_model // config.n_heads
            if config.head_dim == quotient:
                break  # wrong where head_dim is d_model // n_heads too: not this
            try:
                at_quotient = (dataclasses.replace(config, head_dim=quotient),) + tuple(case[1:])
                want = build_want(at_quotient)
            except ValueError:  # a width the model refuses (odd: RoPE rotates pairs)
                break
            again = chk.probe(fn, *at_quotient)
            if key:
                want, again = want[key], again.get(key) if isinstance(again, dict) else None
            if got != want or again != want:
                break
            said.append(f"head_dim {config.head_dim} against d_model // n_heads = {quotient} for {label}")
        else:
            if said:
                confirmed.setdefault("; ".join(said), []).append(key)
    for where, keys in confirmed.items():
        for key in keys:
            findings.per_key.pop(key, None)
            findings.first_wrong.pop(key, None)
            findings.failures.pop(key)
        named = [key for key in keys if key]
        chk.diagnose((f"{joined(named)}: " if named else "") + "head_dim taken as d_model // n_heads, measured where "
                     f"the config sets head_dim apart ({where}): your count is exactly the measured count of the same "
                     "model with head_dim = d_model // n_heads, and your function, called again with that head_dim, "
                     "returns that same count, right there: it did not change when config.head_dim did, which "
                     "published models set apart from d_model // n_heads (Qwen3-4B, Gemma): read config.head_dim")


# ---------------------------------------------------------------------------
# 03: the FLOPs of one multi-head causal attention layer

ATTENTION_FLOP_KEYS = ("qkv_proj", "scores", "mix", "out_proj")


def attention_matmuls(batch: int, seq_len: int, d_model: int, n_heads: int) -> dict[str, Callable[[], Any]]:
    """Each matmul of a causal multi-head attention layer, written out on meta tensors of the given sizes."""
    hd = d_model // n_heads
    meta = dict(device="meta")
    x, w = torch.empty(batch, seq_len, d_model, **meta), torch.empty(d_model, d_model, **meta)
    q = k = v = torch.empty(batch, n_heads, seq_len, hd, **meta)
    weights = torch.empty(batch, n_heads, seq_len, seq_len, **meta)
    y = torch.empty(batch, seq_len, d_model, **meta)
    return {"qkv_proj": lambda: [F.linear(x, w) for _ in range(3)],
            "scores": lambda: q @ k.transpose(-2, -1),
            "mix": lambda: weights @ v,
            "out_proj": lambda: F.linear(y, w)}


def measured_attention_flops(batch: int, seq_len: int, d_model: int, n_heads: int) -> dict[str, int]:
    """FlopCounterMode's count of each matmul of a causal multi-head attention
    layer, written out and run on meta tensors of the given sizes."""
    return {key: flop_count(run) for key, run in attention_matmuls(batch, seq_len, d_model, n_heads).items()}


def matmul_outputs(run: Callable[[], Any]) -> int:
    """The elements of every matmul's output while run() executes (matmuls_seen)."""
    with matmuls_seen() as seen:
        run()
    return seen.outputs


PER_OUTPUT = Part("one per output element of each matmul (m·p for an (m, n) @ (n, p))", frozenset({"outputs"}), 0,
                  "a dot product of n terms counts n multiply-adds, 2n FLOPs (n multiplications and n additions, "
                  "the first added to 0), the convention FlopCounterMode follows: 2·m·n·p per matmul")


ATTENTION_FLOP_CASES = ((2, 16, 64, 4), (3, 40, 48, 6), (1, 2048, 576, 9), (1, 16384, 4096, 32))


MULTIPLY_ADD = ("the factor 2 of a multiply-add is missing: an (m, n) @ (n, p) matmul does m·n·p multiplications "
                "and as many additions, 2·m·n·p FLOPs")
CAUSAL_HALF = ("halved for the causal mask: the matmul computes the whole T × T (the masked half is computed, then "
               "discarded), and that is what is counted here")
# A count of (T + 1) / (2T) of the measurement: the T(T + 1) / 2 query-key pairs on and below the diagonal. Matched
# alone (the ratio changes with T), and said as a measurement with candidates, never as a cause by itself.
CAUSAL_TRIANGLE = "the causal triangle"


def check_attention_flops(attention_flops, *, cases: tuple = ATTENTION_FLOP_CASES) -> None:
    """attention_flops(batch, seq_len, d_model, n_heads) -> {"qkv_proj",
    "scores", "mix", "out_proj"}: the FLOPs of each matmul of one causal
    multi-head attention layer, against FlopCounterMode on the written-out
    layer (the full T × T of QKᵀ and of weights @ V)."""
    __tracebackhide__ = True
    chk = Check("attention_flops", expects="a dict {'qkv_proj', 'scores', 'mix', 'out_proj'} of ints")

    def explain(case, key, got, want):
        B, T, d, H = case
        ratios = {MULTIPLY_ADD: 0.5,
                  "counted twice over (4 FLOPs per multiply-add?): 2·m·n·p for an (m, n) @ (n, p) matmul": 2.0,
                  "the batch is missing: every sequence of the batch is computed": 1 / B}
        diffs, alone = {}, {}
        if key in ("scores", "mix"):
            alone[CAUSAL_TRIANGLE] = (T + 1) / (2 * T)
            product = "q @ kᵀ multiplies (T, head_dim) by (head_dim, T)" if key == "scores" else \
                "the (T, T) weights multiply v, (T, head_dim)"
            ratios.update({f"counted without T: per head, {product}, so it grows with T², not T": 1 / T,
                           CAUSAL_HALF: 0.5,
                           "one head only: every head has its own T × T scores": 1 / H,
                           "head_dim taken as d_model: each head works on head_dim = d_model / n_heads features": H})
            diffs["the attention matmuls are missing: QKᵀ and the weights @ V are matmuls too, the terms that grow "
                  "with T²"] = -want
        else:
            ratios["counted without T: every position is projected, a (B·T, d_model) @ (d_model, d_model) matmul"] = 1 / T
            if key == "qkv_proj":
                ratios["only one of q, k and v: each has its own (d_model, d_model) projection"] = 1 / 3
                diffs["one of q, k and v is missing"] = -(2 * B * T * d * d)
            else:
                diffs["the output projection is missing"] = -want
        outputs = dataclasses.replace(PER_OUTPUT, numbers=matmul_outputs(attention_matmuls(*case)[key]))
        return explanations(got, want, ratios, diffs, alone) | parts_apart([outputs], got, want, "FLOPs")

    labelled = [(f"B={B}, T={T}, d_model={d}, n_heads={H}", (B, T, d, H)) for B, T, d, H in cases]
    findings = run_cases(chk, attention_flops, labelled, ATTENTION_FLOP_KEYS, lambda c: measured_attention_flops(*c),
                          explain)
    # Half the count is the missing multiply-add factor when the projections are halved too; when only the
    # attention matmuls are halved, both causes give the same numbers, and both are said as candidates.
    halved = {k for k, sets in findings.per_key.items() if any(MULTIPLY_ADD in s for s in sets)}
    if halved & {"qkv_proj", "out_proj"}:
        for key in ("scores", "mix"):
            for found in findings.per_key.get(key, []):
                found.discard(CAUSAL_HALF)
    _say_causal_triangle(chk, findings)
    finish_findings(chk, findings)


def _say_causal_triangle(chk: Check, findings: Findings) -> None:
    """Scores or mix counted as the causal triangle in every failing case:
    the measured fact (the ratio follows (T + 1) / (2T) across the cases'
    T) with its candidates. It replaces that key's other lines only when no
    other mistake gives the same counts."""
    keys, seen = [], set()
    for key in ("scores", "mix"):
        sets = findings.per_key.get(key, [])
        if sets and all(CAUSAL_TRIANGLE in found for found in sets):
            others = set.intersection(*sets) - {CAUSAL_TRIANGLE}
            if not others:
                keys.append(key)
                findings.per_key.pop(key)
                findings.first_wrong.pop(key, None)
                seen |= {case[1] for _, case, _ in findings.failures.get(key, [])}
        for found in findings.per_key.get(key, []):
            found.discard(CAUSAL_TRIANGLE)
    if not keys:
        return
    where = " and ".join(keys)
    lengths = ", ".join(str(T) for T in sorted(seen))
    chk.candidates(f"{where}: yours is exactly (T + 1) / (2T) of the measured count in every case (measured at T = "
                   f"{lengths}): the count of the T(T + 1) / 2 query-key pairs on and below the diagonal, the ones the "
                   "causal mask keeps; candidates: (1) the masked entries left out, as if the matmul skipped them; or "
                   "(2) a sum over query positions of the keys each one attends to (i + 1 for query i). The dense "
                   "matmul computes the whole T × T, the masked half included, and that is what is counted here: "
                   "2·T·T·head_dim per head")


# ---------------------------------------------------------------------------
# 05: the parameters of the whole decoder, per component

PARAM_CASES = (
    ("d_model 64, MHA, tied head", tinylm.ModelConfig(vocab_size=256, d_model=64, n_layers=2, n_heads=4)),
    ("d_model 48, GQA, untied head", tinylm.ModelConfig(vocab_size=300, d_model=48, n_layers=3, n_heads=6,
                                                        n_kv_heads=2, d_ff=100, tie_embeddings=False)),
    ("SmolLM2-135M", SMOLLM2_135M),
    ("Llama-3-8B", LLAMA3_8B),
)
# head_dim set apart from d_model // n_heads, as published models set it; checked after PARAM_CASES pass, so a
# count that gets them right and these wrong has read head_dim from somewhere else
HEAD_DIM_PARAM_CASES = (
    ("d_model 40, 4 heads of head_dim 16 (40 // 4 = 10), GQA 4/2",
     tinylm.ModelConfig(vocab_size=200, d_model=40, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16)),
    ("Gemma-7B sizes: d_model 3072, 16 heads of head_dim 256 (3072 // 16 = 192)",
     tinylm.ModelConfig(vocab_size=256000, d_model=3072, n_layers=28, n_heads=16, head_dim=256, d_ff=24576,
                        max_seq_len=8192)),
)


def parameter_mistakes(c: tinylm.ModelConfig, key: str) -> tuple[dict[str, float], dict[str, int]]:
    """(ratios, differences) of the known wrong counts of component `key` for config c."""
    L, d, V, hd, H, kv, ff = c.n_layers, c.d_model, c.vocab_size, c.head_dim, c.n_heads, c.n_kv_heads, c.d_ff
    ratios = {"counted for one block only: every one of the n_layers blocks has its own": 1 / L} \
        if key in ("attention", "mlp") else {}
    diffs: dict[str, int] = {}
    if key == "embedding":
        diffs["the tied head counted inside the embedding: it is the same Parameter, count it once"] = V * d \
            if c.tie_embeddings else 0
        diffs["a learned position table counted (max_seq_len × d_model, GPT-2's wpe): RoPE rotates q and k by "
              "angles computed from the positions and has no parameters"] = c.max_seq_len * d
    elif key == "lm_head":
        if c.tie_embeddings:
            diffs["the tied head counted twice: lm_head.weight is tok_emb.weight, one Parameter (count it under "
                  "embedding, and 0 here)"] = V * d
        else:
            diffs["the untied head is missing: with tie_embeddings=False, lm_head holds its own vocab_size × "
                  "d_model matrix"] = -V * d
        diffs["a bias that does not exist: the head is nn.Linear(..., bias=False)"] = V
    elif key == "attention":
        diffs.update({
            "k_proj and v_proj sized like q_proj: they map d_model to n_kv_heads·head_dim, so "
            "2·n_layers·d_model·(n_heads − n_kv_heads)·head_dim too many": 2 * L * d * (H - kv) * hd,
            "biases that do not exist: Llama's projections are nn.Linear(..., bias=False)": L * (H * hd + 2 * kv * hd + d),
            "biases on q, k and v that do not exist (bias=False)": L * (H + 2 * kv) * hd,
            "the output projection o_proj is missing (n_heads·head_dim -> d_model)": -L * H * hd * d,
            "k_proj or v_proj is missing: both map d_model to n_kv_heads·head_dim": -L * kv * hd * d,
            # zero, so never named, where head_dim is d_model // n_heads
            "head_dim taken as d_model // n_heads: this config sets head_dim apart from it, and every projection is "
            "n_heads·head_dim or n_kv_heads·head_dim wide; read config.head_dim": 2 * L * d * (H + kv) * (d // H - hd),
            "head_dim taken as d_model // n_heads (or n_heads·head_dim as d_model) in q_proj and o_proj (sized "
            "d_model × d_model): they map between "
            "d_model and n_heads·head_dim, which this config sets apart from d_model; read config.head_dim":
                2 * L * d * (d - H * hd) if d != H * hd else 0,
            "head_dim taken as d_model // n_heads (or n_heads·head_dim as d_model), and k_proj and v_proj sized like "
            "q_proj (every projection "
            "d_model × d_model): read config.head_dim, and n_kv_heads·head_dim for k and v":
                4 * L * d * d - L * (2 * d * H * hd + 2 * d * kv * hd) if d != H * hd else 0,
        })
    elif key == "mlp":
        diffs.update({
            "SwiGLU's third matrix forgotten: gate_proj, up_proj and down_proj, 3·d_model·d_ff per block":
                -L * d * ff,
            "biases that do not exist: the three projections are nn.Linear(..., bias=False)": L * (2 * ff + d),
            "the hidden size is 4·d_model (a GELU MLP's), not config.d_ff": 3 * L * d * (4 * d - ff),
            "a GELU MLP counted (GPT-2's two d_model × 4·d_model matrices): SwiGLU has three, gate_proj, up_proj "
            "and down_proj, of d_model·d_ff each": L * d * (8 * d - 3 * ff),
            "the hidden size is 8/3·d_model unrounded, not config.d_ff": 3 * L * d * (8 * d // 3 - ff),
            "the hidden size computed from d_model (the 8/3 rule) instead of read from config.d_ff, which a "
            "published model sets itself": 3 * L * d * (tinylm.default_d_ff(d) - ff),
        })
    elif key == "norms":
        diffs.update({
            "the final norm (before the head) is missing: d_model more": -d,
            "one norm per block: each block has two, attn_norm and mlp_norm": -L * d,
            "the norms' gains are missing: 2 per block and the final one, d_model each": -(2 * L + 1) * d,
            "biases in the norms: RMSNorm has a gain only (no bias, unlike LayerNorm)": (2 * L + 1) * d,
            "the norms of one block only: every block has its two, then the final one": -2 * (L - 1) * d,
        })
    return ratios, diffs


def check_param_counts(param_counts, *, cases: tuple = PARAM_CASES) -> None:
    """param_counts(config) -> {"embedding", "attention", "mlp", "norms",
    "lm_head"}: the parameters of tinylm's decoder per component, summed over
    all blocks, against p.numel() of tinylm.Transformer(config) built on the
    meta device (a tied head is one Parameter, counted under embedding)."""
    __tracebackhide__ = True
    chk = Check("param_counts", expects="a dict {'embedding', 'attention', 'mlp', 'norms', 'lm_head'} of ints")

    def explain(case, key, got, want):
        config, = case
        component = role_components(config)
        parts = [part for part in parameter_parts(config) if all(component[role] == key for role in part.leaves)]
        return explanations(got, want, *parameter_mistakes(config, key)) | parts_apart(
            parts, got, want, "parameters", why="every parameter tensor of the model counts", blocks=config.n_layers,
            sizes=config_sizes(config))

    findings = run_cases(chk, param_counts, [(label, (config,)) for label, config in cases], COMPONENTS,
                          lambda c: config_parameters(*c), explain)
    say_head_dim_quotient(chk, param_counts, findings, lambda c: config_parameters(*c))
    finish_findings(chk, findings)


# ---------------------------------------------------------------------------
# 06: the KV cache in bytes

# Qwen3-4B's sizes (its Hugging Face config.json): head_dim 128 set apart from d_model // n_heads = 80, so a count
# that recomputes the head width from d_model is wrong for it and right for every Llama-shaped config. tinylm's
# blocks lack Qwen3's q/k norms (2·head_dim gains per block), which no cache holds, so its cache is Qwen3-4B's own.
QWEN3_4B_SIZES = tinylm.ModelConfig(vocab_size=151936, d_model=2560, n_layers=36, n_heads=32, n_kv_heads=8,
                                    head_dim=128, d_ff=9728, max_seq_len=40960, rope_theta=1e6)

KV_CACHE_CASES = (
    ("d_model 64, 3 layers, MHA, float32, batch 5, 1040 positions",
     (tinylm.ModelConfig(d_model=64, n_layers=3, n_heads=4), 1040, 5, torch.float32)),
    ("d_model 48, GQA 6/2, bfloat16, batch 3, 100 positions",
     (tinylm.ModelConfig(d_model=48, n_layers=3, n_heads=6, n_kv_heads=2), 100, 3, torch.bfloat16)),
    ("d_model 40, MQA, float16, 77 positions", (tinylm.ModelConfig(d_model=40, n_layers=5, n_heads=4, n_kv_heads=1),
                                                77, 1, torch.float16)),
    ("SmolLM2-135M, bfloat16, 2048 positions", (SMOLLM2_135M, 2048, 1, torch.bfloat16)),
    ("SmolLM2-135M, int8 (a quantised cache), batch 2, 512 positions", (SMOLLM2_135M, 512, 2, torch.int8)),
    ("Llama-3-8B, bfloat16, 65536 positions", (LLAMA3_8B, 65536, 1, torch.bfloat16)),
    ("Qwen3-4B: 32 heads of head_dim 128 (2560 // 32 = 80), GQA 32/8, bfloat16, 4096 positions",
     (QWEN3_4B_SIZES, 4096, 1, torch.bfloat16)),
)


def kv_mistakes(config: tinylm.ModelConfig, batch_size: int, dtype: torch.dtype) -> dict[str, float]:
    """The known wrong KV-cache sizes, as ratios to the right one."""
    size = torch.empty((), dtype=dtype).element_size()
    return {
        "K and V both: the cache keeps a key and a value vector per position": 0.5,
        "per layer: every block keeps its own keys and values (n_layers of them)": 1 / config.n_layers,
        "n_heads instead of n_kv_heads: the cache stores the key/value heads only": config.n_heads / config.n_kv_heads,
        # the same ratio as n_heads' wherever head_dim is d_model // n_heads: a config with head_dim set apart tells
        "d_model per position instead of n_kv_heads·head_dim: the cache holds n_kv_heads key/value heads of "
        "head_dim features each, not the residual stream's width": config.d_model / (config.n_kv_heads * config.head_dim),
        "the group size n_heads // n_kv_heads in place of n_kv_heads: the cache holds n_kv_heads key/value heads "
        "(the group size is how many query heads share each)": (config.n_heads // config.n_kv_heads) / config.n_kv_heads,
        "n_heads·d_model per position instead of n_kv_heads·head_dim: every layer caches n_kv_heads key/value heads "
        "of head_dim features each": config.n_heads * config.d_model / (config.n_kv_heads * config.head_dim),
        "numbers, not bytes: multiply by the bytes per element, dtype.itemsize": 1 / size,
        "the dtype is ignored (4 bytes assumed): the bytes per element are dtype.itemsize": 4 / size,
        # 4 bytes with the keys or the values alone gives every case's count as 2 bytes does: the dtype is
        # ignored either way, which of the two is not told
        "the dtype is ignored: your count is 2 / itemsize times the right one in every case, as a constant 2 bytes "
        "per element gives (or 4 with only the keys or only the values counted); the bytes per element are "
        "dtype.itemsize, and the cache keeps a key and a value vector per position": 2 / size,
        "the batch is ignored: every sequence of the batch has its own cache": 1 / batch_size,
    }


def check_kv_cache_bytes(kv_cache_bytes, *, cases: tuple = KV_CACHE_CASES) -> None:
    """kv_cache_bytes(config, seq_len, batch_size, dtype) -> int: the bytes of
    the keys and values of every layer for seq_len positions, against the
    nbytes of the tensors of a tinylm.KVCache holding exactly that many."""
    __tracebackhide__ = True
    chk = Check("kv_cache_bytes", expects="an int, the bytes of the cache")
    findings, vectors = Findings(), []  # per failing case, the counts of vectors it is
    for label, (config, seq_len, batch_size, dtype) in cases:
        want = kv_cache_nbytes(config, seq_len, batch_size, dtype)
        got = read_int(chk, "kv_cache_bytes", label,
                        chk.call(kv_cache_bytes, config, seq_len, batch_size, dtype, row_label=label))
        ok = got == want
        chk.rows.append(Row(label, ok, close="ok" if ok else "FAIL", note="" if ok or got is None else ratio_words(got, want)))
        if got is not None and not ok:
            counted = positions_counted(config, got, seq_len, dtype, batch_size, "seq_len",
                                        "the bytes of seq_len positions are asked for, whatever the config's "
                                        "max_seq_len (a cache can be built for any length)")
            found = explanations(got, want, kv_mistakes(config, batch_size, dtype), {})
            findings.add("", found | {counted} if counted else found)
            findings.failures.setdefault("", []).append((label, (config, seq_len, batch_size, dtype), got))
            findings.wrong_calls.append(((config, seq_len, batch_size, dtype), {}, want))
            findings.first_wrong.setdefault("", f"for {label}: your byte count is {difference_words(got, want)}, "
                                                f"{ratio_words(got, want)}")
            vectors.append(cached_vectors(config, got, seq_len * batch_size, dtype))
    counted = set.intersection(*vectors) if vectors else set()
    if len(counted) == 1 and not set.intersection(*findings.per_key[""]):  # a named mistake says it better
        for found in findings.per_key[""]:
            found.add(cached_vectors_words(*next(iter(counted))))
    say_head_dim_quotient(chk, kv_cache_bytes, findings, lambda case: kv_cache_nbytes(*case))
    finish_findings(chk, findings)


def cached_vectors(config: tinylm.ModelConfig, got: int, slots: int, dtype: torch.dtype) -> set[tuple[int, int]]:
    """Every (queries, keys or values) pair of small counts whose vectors, per
    position, sequence and layer, add up to exactly `got` bytes over `slots`
    positions·sequences: the vector sizes are measured, the output features
    of attention's q_proj (a query) and k_proj (a key; v_proj's is the same)."""
    with torch.device("meta"), initialisers_skipped():
        attn = tinylm.Attention(config)
    size = torch.empty((), dtype=dtype).element_size()
    per_slot, rest = divmod(got, slots * config.n_layers * size)
    if rest or per_slot <= 0:
        return set()
    q, kv = attn.q_proj.out_features, attn.k_proj.out_features
    return {(a, b) for a in range(4) for b in range(5) if a * q + b * kv == per_slot and (a, b) != (0, 2)}


def cached_vectors_words(queries: int, keys_or_values: int) -> str:
    """What a count of that many query vectors and key or value vectors per position means, for every config."""
    said = f"{keys_or_values} vector{'s' * (keys_or_values != 1)} of n_kv_heads·head_dim (a key's or a value's size, " \
           f"k_proj's and v_proj's output)" + (f" and {queries} of n_heads·head_dim (a query's, q_proj's output)"
                                              if queries else "")
    advice = ("a past query is never used again: each step's query attends to the cached keys and values and is "
              "dropped, so only K and V are cached" if queries else
              "the cache holds one key and one value per position")
    return (f"your count is, in every case, exactly {said} per position, sequence and layer (measured against "
            f"attention's projections); the cache holds 2, a key and a value: {advice}")


# ---------------------------------------------------------------------------
# 07: what one decoding step reads from memory

DECODE_KEYS = ("weights", "kv_cache")
DECODE_CASES = (
    ("d_model 64, MHA, tied, float32, context 200", (tinylm.ModelConfig(d_model=64, n_layers=3, n_heads=4), 200,
                                                     torch.float32)),
    ("d_model 48, GQA 6/2, untied, bfloat16, context 100",
     (tinylm.ModelConfig(vocab_size=300, d_model=48, n_layers=5, n_heads=6, n_kv_heads=2, tie_embeddings=False), 100,
      torch.bfloat16)),
    ("SmolLM2-135M, float32, context 1000", (SMOLLM2_135M, 1000, torch.float32)),
    ("SmolLM2-135M, int8 (a quantised model), context 300", (SMOLLM2_135M, 300, torch.int8)),
    ("Llama-3-8B, bfloat16, context 8192", (LLAMA3_8B, 8192, torch.bfloat16)),
    ("d_model 40, 4 heads of head_dim 16 (40 // 4 = 10), GQA 4/2, untied, float16, context 50",
     (tinylm.ModelConfig(vocab_size=200, d_model=40, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16,
                         tie_embeddings=False), 50, torch.float16)),
)


def decode_reads(config: tinylm.ModelConfig, context_len: int, dtype: torch.dtype) -> dict[str, int]:
    """The bytes a decoding step reads, measured: every parameter of tinylm's
    model in `dtype` once (parameters() yields a tied head once), and the K and
    V tensors of a cache holding context_len positions."""
    params = config_parameters(config)
    size = torch.empty((), dtype=dtype).element_size()
    return {"weights": sum(params.values()) * size, "kv_cache": kv_cache_nbytes(config, context_len, 1, dtype)}


MLP_MATRIX_MISSING = ("one d_model × d_ff matrix per block is missing: SwiGLU's MLP has three (gate_proj, up_proj "
                      "and down_proj), a GELU MLP's two")


def decode_mistakes(config: tinylm.ModelConfig, context_len: int, dtype: torch.dtype, key: str):
    """(ratios, diffs): the known mistakes of decode_bytes_per_token's count of `key`, as explanations reads them."""
    size = torch.empty((), dtype=dtype).element_size()
    if key == "kv_cache":
        ratios = kv_mistakes(config, 1, dtype)
        ratios.pop("the batch is ignored: every sequence of the batch has its own cache")
        ratios["context_len + 1 positions: the cache holds the context_len positions before the new token"] = \
            (context_len + 1) / context_len
        return ratios, {}
    V, d = config.vocab_size, config.d_model
    ratios = {"numbers, not bytes: multiply by the bytes per element, dtype.itemsize": 1 / size,
              "the dtype is ignored (4 bytes assumed): the bytes per element are dtype.itemsize": 4 / size,
              "the dtype is ignored (2 bytes assumed): the bytes per element are dtype.itemsize": 2 / size,
              "your count is n_layers times the bytes of every weight (measured in each case): the blocks' "
              "weights already make n_layers · (one block's); the embedding, the head and the final norm are "
              "read once, and nothing is multiplied by n_layers a second time": config.n_layers}
    diffs = {"the tied head counted twice: it is the embedding's own matrix, read once": V * d * size
             if config.tie_embeddings else 0,
             "a vocab_size × d_model matrix is missing: an untied model has two, the head (read at every step) "
             "and the embedding (a lookup reads one row of it, but the convention here counts every weight once)":
                 -V * d * size if not config.tie_embeddings else 0,
             "the norms' gains are missing (2 per block and the final one)": -(2 * config.n_layers + 1) * d * size,
             "one norm gain per block is missing: each block has two, attn_norm and mlp_norm":
                 -config.n_layers * d * size,
             "the final norm's gain is missing (the one before the head)": -d * size,
             # zero, so never named, for one block
             "the final norm's gain counted in every block (n_layers times): there is one, read once, before the "
             "head": (config.n_layers - 1) * d * size,
             MLP_MATRIX_MISSING: -config.n_layers * d * config.d_ff * size,
             "one d_model × n_kv_heads·head_dim matrix per block is missing: k_proj and v_proj are one each "
             "(where n_kv_heads = n_heads, q_proj and o_proj are that size too)":
                 -config.n_layers * d * config.n_kv_heads * config.head_dim * size,
             # zero, so never named, where head_dim is d_model // n_heads
             "head_dim taken as d_model // n_heads (or n_heads·head_dim as d_model) in q_proj and o_proj (counted "
             "d_model × d_model): they map between d_model and n_heads·head_dim, which this config sets apart "
             "from d_model; read config.head_dim":
                 2 * config.n_layers * d * (d - config.n_heads * config.head_dim) * size}
    return ratios, diffs


def check_decode_bytes_per_token(decode_bytes_per_token, *, cases: tuple = DECODE_CASES) -> None:
    """decode_bytes_per_token(config, context_len, dtype) -> {"weights",
    "kv_cache"}: the bytes one decoding step reads (every weight once, and the
    keys and values of the context_len cached positions), against the nbytes
    of tinylm's parameters in that dtype and of a KVCache of that length."""
    __tracebackhide__ = True
    chk = Check("decode_bytes_per_token", expects="a dict {'weights', 'kv_cache'} of ints (bytes)")

    def explain(case, key, got, want):
        config, context_len, dtype = case
        size = torch.empty((), dtype=dtype).element_size()
        ratios, diffs = decode_mistakes(config, context_len, dtype, key)
        if key == "kv_cache":
            found = explanations(got, want, ratios, {})
            counted = None if found else positions_counted(config, got, context_len, dtype)
            return found or ({counted} if counted else set())
        V = config.vocab_size
        parts = parameter_parts(config)
        embedding = [part for part in parts if part.leaves == {"tok_emb.weight"}]  # the matrix a lookup reads
        found = explanations(got, want, ratios, diffs) | parts_apart(
            parts, got, want, "parameters", size, {Fraction(1, size): IN_NUMBERS},
            "a decoding step reads every parameter once, whatever it does", sizes=config_sizes(config)) | parts_apart(
            embedding, got, want, "parameters", size, {Fraction(1, V): "is counted as the one row a lookup reads: "
                                                       "the convention here counts every parameter once, whole"})
        apart = None if found or (got - want) % size else roles_apart(config, (got - want) // size)
        return found or ({apart} if apart else set())

    findings = run_cases(chk, decode_bytes_per_token, cases, DECODE_KEYS, lambda c: decode_reads(*c), explain,
                          refute=lambda case, key, want: refuted(want, *decode_mistakes(*case, key)))
    say_head_dim_quotient(chk, decode_bytes_per_token, findings, lambda c: decode_reads(*c))
    finish_findings(chk, findings)


# ---------------------------------------------------------------------------
# 09: what one training step costs

TRAIN_KEYS = ("flops", "weights", "grads", "adam_moments")
TRAIN_CASES = (
    ("d_model 64, tied, batch 8, seq 256", (tinylm.ModelConfig(d_model=64, n_layers=2, n_heads=4), 8, 256)),
    ("d_model 48, GQA 6/2, untied, batch 3, seq 40",
     (tinylm.ModelConfig(vocab_size=300, d_model=48, n_layers=3, n_heads=6, n_kv_heads=2, tie_embeddings=False), 3, 40)),
    ("SmolLM2-135M, batch 4, seq 2048", (SMOLLM2_135M, 4, 2048)),
)
# head_dim set apart from d_model // n_heads: a width recomputed from d_model shows only here. A call of its own
# (notebook 09 makes it after the visible one): the known variants of TRAIN_CASES's rows are named on those rows
HEAD_DIM_TRAIN_CASES = (
    ("d_model 40, 4 heads of head_dim 16 (40 // 4 = 10), GQA 4/2, batch 2, seq 24",
     (tinylm.ModelConfig(vocab_size=200, d_model=40, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16), 2, 24)),
)


def measured_train_step(config: tinylm.ModelConfig, batch_size: int, seq_len: int) -> dict[str, int]:
    """FLOPs of one forward and backward pass of tinylm's model with attention
    written out (attn_impl="reference"), and the bytes of the parameters,
    gradients and AdamW moments after one step, all on the meta device
    (measured once per config, batch size and length; a model of more than
    two layers through per_layer)."""
    return dict(_measured_train_step(config, batch_size, seq_len))


@functools.lru_cache(maxsize=32)
def _measured_train_step(config: tinylm.ModelConfig, batch_size: int, seq_len: int) -> tuple:
    return tuple(per_layer(lambda c: _train_step_measurement(c, batch_size, seq_len), config).items())


def _train_step_measurement(config: tinylm.ModelConfig, batch_size: int, seq_len: int) -> dict[str, int]:
    # The AdamW step uses the counted pass's gradients: what after_one_adamw_step(config) measures (no size
    # depends on the attention's form, the batch or the length), without a second forward and backward pass.
    model = meta_model(config, attn_impl="reference", max_seq_len=seq_len)
    flops = train_step_flops(model, batch_size, seq_len, keep_grads=True)
    return {"flops": flops, **adamw_step_state(model)}


def per_layer(measure: Callable[[tinylm.ModelConfig], dict[str, int]], config: tinylm.ModelConfig) -> dict[str, int]:
    """measure(config), measured on models of one and two layers: tinylm's
    blocks are one module applied n_layers times, so each count of the whole
    model is (the rest) + n_layers·(one block's), and the two measurements
    give both terms exactly. A forward and backward pass on the meta device
    costs about 30 ms of CPU per layer, counted (SmolLM2-135M's thirty: a
    second); tests/checks/test_accounting.py holds this to a measurement of
    the whole depth."""
    if config.n_layers <= 2:
        return measure(config)
    one, two = (measure(dataclasses.replace(config, n_layers=n)) for n in (1, 2))
    return {key: one[key] + (config.n_layers - 1) * (two[key] - one[key]) for key in one}


def train_mistakes(config: tinylm.ModelConfig, batch_size: int, seq_len: int, key: str):
    """(ratios, differences) of the known wrong values of `key`."""
    L, d, V, T, B = config.n_layers, config.d_model, config.vocab_size, seq_len, batch_size
    attention = 12 * L * B * T * T * config.n_heads * config.head_dim  # forward 4·…, backward twice that
    norms = (2 * L + 1) * d
    if key == "flops":
        roles, multiplied = dict(parameter_roles(config)), multiplied_roles(config)
        weights = sum(n for role, n in roles.items() if role in multiplied)  # the numbers a matmul multiplies
        ratios = {"the forward pass only: the backward pass costs twice the forward (per matmul, one matmul for the "
                  "gradient of its input and one for its weight's)": 1 / 3,
                  "the backward pass counted once: it does two matmuls for every matmul of the forward": 2 / 3,
                  "the factor 2 of a multiply-add is missing: an (m, n) @ (n, p) matmul is 2·m·n·p FLOPs": 0.5}
        diffs = {"6·N·B·T with N every parameter: the norm gains multiply elementwise and the embedding lookup "
                 "copies rows, neither is a matmul (a tied head is, once)":
                     6 * B * T * (norms + (0 if config.tie_embeddings else V * d)),
                 "the attention matmuls are missing: QKᵀ and weights @ V, 12·n_layers·B·T²·n_heads·head_dim with "
                 "their backward": -attention,
                 "attention counted without T: its matmuls grow with T², not T": -attention + attention // T,
                 "the attention matmuls counted for the forward pass only: their backward does twice the forward's "
                 "4·n_layers·B·T²·n_heads·head_dim": -attention * 2 // 3,
                 "the attention matmuls counted for n_kv_heads heads: each of the n_heads query heads does its own "
                 "T × T matmuls with its shared key/value head, 12·n_layers·B·T²·n_heads·head_dim with their backward":
                     attention * config.n_kv_heads // config.n_heads - attention,
                 "attention halved for the causal mask: the matmuls compute the whole T × T": -attention // 2,
                 "attention's matmuls sized by config.max_seq_len in place of one of their two seq_len (T × "
                 "max_seq_len scores): the windows hold seq_len tokens, so the scores are seq_len × seq_len":
                     attention // T * config.max_seq_len - attention,
                 "attention's matmuls sized by config.max_seq_len in place of seq_len (max_seq_len × max_seq_len "
                 "scores): the windows hold seq_len tokens, so the scores are seq_len × seq_len":
                     attention // (T * T) * config.max_seq_len ** 2 - attention,
                 "attention's T × T matmuls counted twice: forward and backward make 12·n_layers·B·T²·n_heads·"
                 "head_dim, 3 times the forward's 4·n_layers·B·T²·n_heads·head_dim, and your count holds twice that, "
                 "as 6 times the forward gives (the 6 of 6·N·tokens counts the 2 FLOPs of a multiply-add, which the "
                 "forward's 4·… holds already)": attention,
                 "one of attention's two T × T matmuls is missing (QKᵀ or weights @ V, each half of the "
                 "attention's FLOPs), with its backward": -attention // 2,
                 "the embedding lookup counted as a matmul: it copies rows, 0 FLOPs (the tied head is the one "
                 "matmul with that matrix)": 6 * B * T * V * d,
                 "the head's matmul is missing: (B·T, d_model) @ (d_model, vocab_size), with its backward":
                     -6 * B * T * V * d,
                 "the head's matmul counted n_layers times: the model has one head, after the last block, "
                 "6·B·T·vocab_size·d_model with its backward (the head inside the n_layers product)":
                     6 * B * T * V * d * (L - 1),
                 "attention's T × T matmuls counted for one layer: every block has its own, "
                 "12·n_layers·B·T²·n_heads·head_dim with their backward": attention // L - attention,
                 "the norms' gains counted as matmul weights: they multiply elementwise": 6 * B * T * norms,
                 MLP_MATRIX_MISSING: -6 * B * T * L * d * config.d_ff,
                 # zero, so never named, where n_heads · head_dim is d_model
                 "attention's T × T matmuls counted with a width of d_model in place of n_heads·config.head_dim "
                 "(the width of q, k and v, which this config sets apart from d_model; head_dim taken as d_model // "
                 "n_heads gives that width too where n_heads divides d_model)": 12 * L * B * T * T * d - attention,
                 "the weight matmuls counted for the forward pass only, 2 FLOPs per weight and token (attention's "
                 "T × T matmuls with their backward): the backward does twice the forward again, 6 per weight and "
                 "token": -4 * B * T * weights}
        return ratios, diffs
    ratios = {"parameters, not bytes: each float32 number is 4 bytes": 1 / 4}
    diffs = {"the tied head counted twice: tok_emb and lm_head share one Parameter": 4 * V * d
             if config.tie_embeddings else 0,
             "one vocab_size × d_model matrix is missing: with tie_embeddings=False the embedding table and the "
             "head are two, count both": -4 * V * d if not config.tie_embeddings else 0,
             "the head's vocab_size × d_model matrix counted n_layers times: the model has one head, after the last "
             "block, not one per block (the head inside the n_layers product)": 4 * V * d * (L - 1),
             MLP_MATRIX_MISSING: -4 * L * d * config.d_ff}
    if key == "adam_moments":
        ratios["one moment only: AdamW keeps two per parameter, exp_avg and exp_avg_sq"] = 0.5
        # Half the bytes is also two moments at 2 bytes each: the count alone cannot tell them apart.
        ratios["the moments counted at 2 bytes each (bfloat16 or float16): AdamW keeps them in the parameters' "
               "dtype, float32, 4 bytes a number"] = 0.5
        diffs = {k: 2 * v for k, v in diffs.items()}
    return ratios, diffs


def check_train_step_costs(train_step_costs, *, cases: tuple = TRAIN_CASES) -> None:
    """train_step_costs(config, batch_size, seq_len) -> {"flops", "weights",
    "grads", "adam_moments"}: the matmul FLOPs of one forward and backward
    pass, and the bytes (float32) of the parameters, their gradients and
    AdamW's two moments, against FlopCounterMode on tinylm's model with
    attention written out and the tensors that exist after an AdamW step."""
    __tracebackhide__ = True
    chk = Check("train_step_costs", expects="a dict {'flops', 'weights', 'grads', 'adam_moments'} of ints")

    def explain(case, key, got, want):
        found = explanations(got, want, *train_mistakes(*case, key))
        if key == "flops":
            return found
        per, factors = (8, {}) if key == "adam_moments" else (4, {Fraction(1, 4): IN_NUMBERS})
        return found | parts_apart(parameter_parts(case[0]), got, want, "parameters", per, factors,
                                   "every parameter is stored, has a gradient and two AdamW moments, whether a matmul "
                                   "multiplies it or not (the 6·N rule's N counts the FLOPs of the matmuls, not memory)",
                                   sizes=config_sizes(case[0]))

    # budget 0: a training step's measurement takes about 0.1 s of CPU (per_layer), and a search of the config's
    # sizes (about 60 of them) would keep the learner waiting several seconds
    findings = run_cases(chk, train_step_costs, cases, TRAIN_KEYS, lambda c: measured_train_step(*c), explain,
                          budget=0, refute=lambda case, key, want: refuted(want, *train_mistakes(*case, key)))
    say_head_dim_quotient(chk, train_step_costs, findings, lambda c: measured_train_step(*c))
    finish_findings(chk, findings)
