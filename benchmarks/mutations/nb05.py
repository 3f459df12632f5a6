"""Mistakes in notebook 05 (SwiGLU, its hidden size, the pre-norm block)."""
from . import Mutation as M

GATE = "F.silu(x @ w_gate.T)"
ATTN = "x = x + attn(attn_norm(x))"
MLP = "x = x + mlp(mlp_norm(x))"

MUTATIONS = [
    # swiglu
    M("swiglu", GATE, "F.relu(x @ w_gate.T)", ("ReLU",), "uses ReLU for the gate"),
    M("swiglu", GATE, "torch.sigmoid(x @ w_gate.T)", ("sigmoid",), "uses sigmoid (the GLU gate) instead of SiLU"),
    M("swiglu", GATE, "F.gelu(x @ w_gate.T)", ("GELU",), "uses GELU (GeGLU)"),
    M("swiglu", GATE, "(x @ w_gate.T)", ("identity", "no activation", "SiLU missing"), "forgets the activation"),
    M("swiglu", "(gate * up)", "(gate + up)", ("sum",), "adds the branches instead of multiplying"),
    M("swiglu", "up = x @ w_up.T", "up = F.silu(x @ w_up.T)", ("both branches",), "puts SiLU on both branches"),
    M("swiglu", GATE, "F.silu(x @ w_up.T)", ("w_gate is not used", "w_up"), "uses w_up for the gate"),
    M("swiglu", "return (gate * up) @ w_down.T", "return (gate * up) @ w_down", ("d_ff",),
      "forgets the transpose of w_down"),
    M("swiglu", "x @ w_gate.T", "x @ w_gate", ("d_ff",), "forgets the transpose of w_gate"),
    M("swiglu", "return (gate * up) @ w_down.T", "return F.silu((gate * up) @ w_down.T)", ("on the output",),
      "applies SiLU to the output too"),
    M("swiglu", GATE, "F.softplus(x @ w_gate.T)", ("softplus",), "uses softplus"),
    M("swiglu", "return (gate * up) @ w_down.T", "return gate @ w_down.T", ("up branch",), "drops the up branch"),
    M("swiglu", "F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n    up = x @ w_up.T",
      "F.silu(x @ w_up.T)\n    up = x @ w_gate.T", ("swapped",),
      "swaps gate and up"),
    # swiglu_hidden
    M("swiglu_hidden", "math.ceil", "math.floor", ("rounded down",), "rounds down"),
    M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)", "return 4 * d_model",
      ("4 · d_model",), "uses the GELU MLP's 4 · d_model"),
    M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)", "return int(8 * d_model / 3)",
      ("not rounded",), "does not round to a multiple"),
    M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
      "return multiple * round(8 * d_model / 3 / multiple)", ("rounded down", "round"), "rounds to the nearest multiple"),
    M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
      "return float(multiple * math.ceil(8 * d_model / 3 / multiple))", ("not an int",), "returns a float"),
    M("swiglu_hidden", "8 * d_model / 3", "8 // 3 * d_model", ("8 // 3",), "integer-divides 8 by 3"),
    M("swiglu_hidden", "return multiple * math.ceil(", "return math.ceil(", ("multiply by `multiple`",),
      "returns the number of multiples"),
    M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
      "return 32 * math.ceil(8 * d_model / 3 / 32)", ("`multiple` is ignored",), "hard-codes 32"),
    # pre_norm_block
    M("pre_norm_block", ATTN, "x = attn_norm(x + attn(x))", ("post-norm",), "normalises after the residual add"),
    M("pre_norm_block", ATTN, "x = attn(attn_norm(x))", ("missing residual around attention",), "drops the attention residual"),
    M("pre_norm_block", MLP, "x = mlp(mlp_norm(x))", ("missing residual around the MLP",), "drops the MLP residual"),
    M("pre_norm_block", ATTN, "x = x + attn(mlp_norm(x))", ("mlp_norm",), "uses mlp_norm before attention"),
    M("pre_norm_block", "mlp(mlp_norm(x))", "mlp(attn_norm(x))", ("attn_norm",), "uses attn_norm before the MLP"),
    M("pre_norm_block", ATTN, "x = x + attn(x)", ("without attn_norm", "not normalised"),
      "feeds attention the raw stream"),
    M("pre_norm_block", "mlp(mlp_norm(x))", "mlp(x)", ("without mlp_norm", "not normalised"), "feeds the MLP the raw stream"),
    M("pre_norm_block", f"{ATTN}  # the branch reads a normalised copy; the stream stays a sum\n    {MLP}",
      "x = x + attn(attn_norm(x)) + mlp(mlp_norm(x))", ("parallel",), "runs the branches in parallel"),
    M("pre_norm_block", ATTN, "x = attn_norm(x) + attn(attn_norm(x))", ("normalised input",),
      "adds the branch to the normalised input"),
    M("pre_norm_block", "    return x", "    return mlp_norm(x)", ("output is normalised",), "normalises the output"),
    M("pre_norm_block", "mlp(mlp_norm(x))", "mlp_norm(mlp(x))", ("after the branch",), "normalises after the MLP"),
    M("pre_norm_block", ATTN, "x = x * attn(attn_norm(x))", ("multiplied",), "multiplies the residual"),
    M("pre_norm_block", f"{ATTN}  # the branch reads a normalised copy; the stream stays a sum\n    {MLP}",
      f"{MLP}\n    {ATTN}", ("before attention",), "runs the MLP before attention"),
    # after learners' reports: the regimes later notebooks use (a cache, grouped kv heads) and module containers
    M("Transformer", "q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)",
      "q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)", ("start_pos",),
      "ignores start_pos: cached steps are rotated as position 0", added="learner-reports"),
    M("Transformer", "q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)",
      "q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin)", ("start_pos",),
      "rotates only the new query by start_pos, the keys from 0", added="learner-reports"),
    M("Transformer", "k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim)",
      "k = self.k_proj(x).view(B, T, self.n_heads, self.head_dim)", ("n_kv_heads",),
      "splits the keys into n_heads heads", added="learner-reports"),
    M("Transformer", "y = causal_attention(q, k, v)", "y = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
      ("top-left", "enable_gqa", "kv heads"), "calls SDPA with is_causal (top-left with a cache, no GQA)",
      added="learner-reports"),
    M("Transformer", "x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)",
      "x = x + self.attn(self.attn_norm(x), cos, sin, cache)", ("layer_idx", "layer index"),
      "Block drops the layer index: every layer writes layer 0 of the cache", added="learner-reports"),
    M("Transformer", "x = block(x, self.rope_cos, self.rope_sin, cache, i)", "x = block(x, self.rope_cos, self.rope_sin)",
      ("cache",), "Transformer does not pass the cache to the blocks", added="learner-reports"),
    M("Transformer", "self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))",
      "self.blocks = [Block(config) for _ in range(config.n_layers)]", ("ModuleList",),
      "keeps the blocks in a plain Python list", added="learner-reports"),
    # head_dim set apart from d_model // n_heads (Gemma, Mistral NeMo)
    M("Transformer", """        self.q_proj = nn.Linear(config.d_model, config.n_heads * config.head_dim, bias=False)
        self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.v_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=False)""",
      """        hd = config.d_model // config.n_heads
        self.q_proj = nn.Linear(config.d_model, config.d_model, bias=False)
        self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(config.d_model, config.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(config.d_model, config.d_model, bias=False)""",
      ("head_dim taken as d_model // n_heads",), "sizes the projections with d_model // n_heads", added="shipped-bugs"),
    M("Transformer", "self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=False)",
      "self.o_proj = nn.Linear(config.d_model, config.d_model, bias=False)",
      ("head_dim taken as d_model // n_heads",), "sizes o_proj d_model x d_model", added="shipped-bugs"),
    M("Transformer", "config.n_heads, config.n_kv_heads, config.head_dim\n",
      "config.n_heads, config.n_kv_heads, config.d_model // config.n_heads\n",
      ("head_dim taken as d_model // n_heads",), "computes self.head_dim as d_model // n_heads", added="shipped-bugs"),
    M("Transformer", "y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)",
      "y = y.transpose(1, 2).reshape(B, T, x.shape[-1])",
      ("head_dim taken as d_model // n_heads",), "merges the heads into d_model features", added="shipped-bugs"),
    M("param_counts", "q_and_o = 2 * d * config.n_heads * hd", "q_and_o = 2 * d * d",
      ("head_dim taken as d_model // n_heads",), "counts q_proj and o_proj as d_model x d_model", added="shipped-bugs"),
    M("param_counts", "d, L, hd = config.d_model, config.n_layers, config.head_dim",
      "d, L, hd = config.d_model, config.n_layers, config.d_model // config.n_heads",
      ("head_dim taken as d_model // n_heads",), "computes head_dim as d_model // n_heads", added="shipped-bugs"),
]
