import dataclasses
import math

import pytest

from tinylm import ModelConfig, default_d_ff


def test_d_ff_follows_the_eight_thirds_rule_rounded_up_to_32():
    # 8/3 · 96 = 256 exactly; 8/3 · 128 = 341.3 -> 352; 8/3 · 40 = 106.7 -> 128
    assert default_d_ff(96) == 256
    assert default_d_ff(128) == 352
    assert ModelConfig(d_model=40, n_heads=4).d_ff == 128
    for d in range(8, 400, 8):
        d_ff = default_d_ff(d)
        assert d_ff % 32 == 0 and 8 * d / 3 <= d_ff < 8 * d / 3 + 32


def test_derived_fields():
    c = ModelConfig(d_model=96, n_heads=6, n_kv_heads=2)
    assert (c.head_dim, c.n_rep) == (16, 3)
    assert ModelConfig(n_heads=4).n_kv_heads == 4  # None means MHA
    assert ModelConfig(d_model=64, n_heads=4, d_ff=100).d_ff == 100  # explicit wins


def test_frozen_and_rebuildable_from_dict():
    c = ModelConfig(d_model=64, n_heads=4, n_kv_heads=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.d_model = 32
    assert ModelConfig(**dataclasses.asdict(c)) == c


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(d_model=0), "d_model"),
        (dict(vocab_size=-5), "vocab_size"),
        (dict(n_layers=2.0), "n_layers"),
        (dict(max_seq_len=True), "max_seq_len"),
        (dict(d_ff=0), "d_ff"),
        (dict(d_model=100, n_heads=8), "n_heads"),
        (dict(n_heads=4, n_kv_heads=3), "n_kv_heads"),
        (dict(d_model=36, n_heads=4), "head_dim"),
        (dict(rope_theta=0.0), "rope_theta"),
        (dict(norm_eps=0.0), "norm_eps"),
        (dict(dropout=1.0), "dropout"),
        (dict(attn_impl="flash"), "attn_impl"),
    ],
)
def test_invalid_combinations_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ModelConfig(**kwargs)


def test_divisibility_errors_say_how_to_fix():
    with pytest.raises(ValueError, match="divisors of d_model"):
        ModelConfig(d_model=100, n_heads=8)
    with pytest.raises(ValueError, match="even"):
        ModelConfig(d_model=36, n_heads=4)
    assert math.isclose(ModelConfig().rope_theta, 10000.0)


def test_head_dim_defaults_to_the_quotient_and_can_be_set_apart():
    assert ModelConfig(d_model=96, n_heads=6).head_dim == 16
    # Gemma 7B's attention: 16 heads of 256 features over a 3072-wide stream (3072 // 16 = 192).
    gemma = ModelConfig(d_model=3072, n_heads=16, head_dim=256)
    assert (gemma.head_dim, gemma.d_model // gemma.n_heads) == (256, 192)
    # Set apart, d_model need not be a multiple of n_heads.
    assert ModelConfig(d_model=40, n_heads=3, head_dim=12).head_dim == 12
    assert ModelConfig(d_model=64, n_heads=4) == ModelConfig(d_model=64, n_heads=4, head_dim=16)


@pytest.mark.parametrize("head_dim", [0, -8, 8.0, True, "16"])
def test_a_head_dim_that_is_not_a_positive_int_is_refused_by_name(head_dim):
    with pytest.raises(ValueError, match="ModelConfig.head_dim must be a positive integer"):
        ModelConfig(d_model=64, n_heads=4, head_dim=head_dim)


def test_an_odd_head_dim_is_refused_by_name():
    with pytest.raises(ValueError, match=r"ModelConfig.head_dim=7 is odd"):
        ModelConfig(d_model=64, n_heads=4, head_dim=7)
