"""Mistakes in notebook 08 (sampling: top_k_filter, top_p_filter, sample_next, generate)."""
from . import Mutation

M = Mutation
KTH = "kth = logits.topk(k, dim=-1).values[..., -1:]"
TEMPER = "    logits = logits / temperature             # on logits, before any filter\n"
TEMPERED_FILTERS = (TEMPER + "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
                    "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n"
                    "    probs = logits.softmax(dim=-1)")
SAMPLE = "return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)"
MUTATIONS = [
    # top_k_filter
    M("top_k_filter", KTH, "kth = logits.topk(k, dim=-1).values[..., -2:-1]", ("k - 1",), "threshold at the (k-1)-th"),
    M("top_k_filter", KTH, "kth = logits.sort(dim=-1, descending=True).values[..., k:k + 1]", ("k + 1",),
      "sort(...)[k] is the (k+1)-th largest"),
    M("top_k_filter", KTH, "kth = logits.flatten().topk(k).values[-1]", ("whole batch",), "threshold over the whole batch"),
    M("top_k_filter", KTH, "kth = logits.topk(k, dim=0).values[-1:]", ("batch axis", "whole batch", "dim"),
      "top-k along the batch axis"),
    M("top_k_filter", "logits < kth", "logits <= kth", ("k - 1", "drops the k-th"), "drops the k-th itself"),
    M("top_k_filter", 'float("-inf")', "0.0", ("0 instead of -inf",), "fills with 0"),
    M("top_k_filter", "return logits.masked_fill(logits < kth, float(\"-inf\"))",
      "return logits.topk(k, dim=-1).values", ("shape",), "returns the k values themselves"),
    M("top_k_filter", "return logits.masked_fill(logits < kth, float(\"-inf\"))",
      "return torch.full_like(logits, float('-inf')).scatter(-1, logits.topk(k, dim=-1).indices, logits.topk(k, dim=-1).values).sort(-1, descending=True).values",
      ("sorted order",), "right kept values, returned sorted"),
    M("top_k_filter", "logits < kth", "logits > kth", ("smallest", "least likely"), "keeps the smallest"),
    M("top_k_filter", "return logits.masked_fill(logits < kth, float(\"-inf\"))",
      "return logits.masked_fill(logits < kth, float(\"-inf\")).softmax(-1)", ("probabilities",), "returns probabilities"),
    # top_p_filter
    M("top_p_filter", "drop_sorted = mass_before >= p", "drop_sorted = probs.cumsum(dim=-1) > p", ("crossing",),
      "drops the crossing token"),
    M("top_p_filter", "logits.sort(dim=-1, descending=True)", "logits.sort(dim=-1)", ("least likely", "descending"),
      "sorts ascending"),
    M("top_p_filter", "drop = drop_sorted.scatter(-1, order, drop_sorted)", "drop = drop_sorted", ("sorted order", "scatter"),
      "forgets to map the mask back to vocabulary order"),
    M("top_p_filter", "drop = drop_sorted.scatter(-1, order, drop_sorted)", "drop = drop_sorted.gather(-1, order)",
      ("scatter", "inverse"), "maps back with gather (the inverse permutation)"),
    M("top_p_filter", "return logits.masked_fill(drop, float(\"-inf\"))",
      "return sorted_logits.masked_fill(drop_sorted, float(\"-inf\"))", ("sorted order",),
      "returns the filtered logits in sorted order"),
    M("top_p_filter", "probs = sorted_logits.softmax(dim=-1)", "probs = sorted_logits", ("logits, not probabilities", "softmax"),
      "cumulative sum of logits"),
    M("top_p_filter", "probs = sorted_logits.softmax(dim=-1)", "probs = sorted_logits.softmax(dim=0)", ("axis", "dim"),
      "softmax over the batch axis"),
    M("top_p_filter", "drop_sorted = mass_before >= p", "drop_sorted = mass_before >= 1 - p", ("p",), "uses 1 - p"),
    # sample_next
    M("sample_next", "logits = logits / temperature ", "logits = logits * temperature ", ("multiplied",),
      "multiplies by the temperature"),
    M("sample_next", "logits = logits / temperature ", "logits = logits ", ("temperature",),
      "temperature applied after softmax: divides the probabilities (which the draw renormalises)",
      extra="_after = sample_next\n\ndef sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):\n"
            "    if temperature == 0:\n        return logits.argmax(dim=-1)\n"
            "    z = top_p_filter(top_k_filter(logits, top_k) if top_k else logits, top_p) if top_p else "
            "(top_k_filter(logits, top_k) if top_k else logits)\n"
            "    probs = z.softmax(-1) / temperature\n"
            "    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)"),
    M("sample_next", SAMPLE, "return probs.argmax(dim=-1)", ("argmax", "no randomness"), "argmax instead of sampling"),
    M("sample_next", SAMPLE, "return torch.multinomial(probs, num_samples=1, generator=generator)", ("(b, 1)", "squeeze", "shape"),
      "forgets the squeeze"),
    M("sample_next", "generator=generator)", ")", ("generator",), "does not pass the generator"),
    M("sample_next", "    if temperature == 0:\n        return logits.argmax(dim=-1)          # greedy: no randomness at all\n", "",
      ("temperature 0", "greedy"), "divides by zero at temperature 0"),
    M("sample_next", "logits = top_k_filter(logits, top_k)", "logits = top_k_filter(logits, top_k + 1)", ("k + 1",),
      "passes k + 1"),
    M("sample_next", "if top_p is not None:\n        logits = top_p_filter(logits, top_p)", "pass", ("top-p ignored",),
      "never applies top-p"),
    M("sample_next", SAMPLE, "return torch.multinomial(probs[:1], num_samples=1, generator=generator).squeeze(-1).expand(probs.shape[0])",
      ("same token", "every row"), "one draw for the whole batch"),
    M("sample_next", "logits = top_k_filter(logits, top_k)", "logits = top_k_filter(logits, top_k)  # unchanged",
      ("top_k_filter",), "correct itself, but the top_k_filter it calls (exercise 1) keeps k + 1",
      extra="def top_k_filter(logits, k):  # the learner's broken exercise 1\n"
            "    kth = logits.sort(dim=-1, descending=True).values[..., k:k + 1]\n"
            "    return logits.masked_fill(logits < kth, float('-inf'))"),
    # generate
    M("generate", "    model.eval() ", "    pass ", ("dropout",), "no model.eval()"),
    M("generate", "model.train(was_training)", "model.eval()", ("restore", "mode"), "leaves the model in eval mode"),
    M("generate", "next_id = sample_next(logits, temperature, top_k, top_p, generator)",
      "next_id = sample_next(logits, temperature, top_k, top_p)", ("generator",), "drops the generator"),
    M("generate", "next_id = sample_next(logits, temperature, top_k, top_p, generator)",
      "next_id = sample_next(logits, generator=generator)", ("temperature",), "drops temperature and the filters"),
    M("generate", "logits = model(idx)[:, -1]", "logits = model(idx)[:, 0]", ("first position", "last position"),
      "logits of the first position", untrue=("softmax taken of the probabilities",)),
    M("generate", "with torch.no_grad():", "with torch.enable_grad():", ("no_grad", "autograd"), "records gradients"),
    M("generate", "return idx", "return idx[:, prompt.shape[1]:]", ("prompt",), "returns only the new tokens"),
    M("generate", "for _ in range(max_new_tokens):", "for _ in range(max_new_tokens - 1):", ("new tokens",),
      "one token too few"),
    M("generate", "logits = model(idx)[:, -1]", "logits = model(idx[:, -1:])[:, -1]", ("only the last token", "context"),
      "feeds only the last token without a cache", untrue=("softmax taken of the probabilities",)),
    # the edges real implementations shipped wrong
    M("top_k_filter", "    k = min(k, logits.shape[-1])                           # k past the vocabulary keeps every token\n",
      "", ("larger than the vocabulary",), "passes a k larger than the vocabulary to topk, which raises",
      added="real-world-edges"),
    M("top_p_filter", "drop_sorted = mass_before >= p", "drop_sorted = probs.cumsum(dim=-1) > p\n    drop_sorted[0, 0] = False",
      ("crossing",), "keeps the top token of the first row only, so a row whose top token alone holds more than p "
      "keeps nothing", added="real-world-edges"),
    M("top_p_filter", "drop_sorted = mass_before >= p",
      "drop_sorted = probs.cumsum(dim=-1) > p\n    drop_sorted[..., 1:] = drop_sorted[..., :-1].clone()\n"
      "    drop_sorted.view(-1, drop_sorted.shape[-1])[0, 0] = False", ("not filtered independently",),
      "keeps the crossing token by shifting the mask, but sets 'keep the top token' on the first row only",
      added="real-world-edges"),
    # after learners' reports: contracts and the order of the transforms
    M("top_k_filter", 'return logits.masked_fill(logits < kth, float("-inf"))',
      'return logits.masked_fill_(logits < kth, float("-inf"))', ("in place",), "fills the caller's logits in place",
      added="learner-reports"),
    M("top_p_filter", 'return logits.masked_fill(drop, float("-inf"))', 'return logits.masked_fill_(drop, float("-inf"))',
      ("in place",), "fills the caller's logits in place", added="learner-reports"),
    M("sample_next", "logits = logits / temperature ", "logits /= temperature ", ("in place",),
      "divides the caller's logits in place", added="learner-reports"),
    M("sample_next", TEMPERED_FILTERS,
      TEMPERED_FILTERS.replace(TEMPER, "").replace("probs = logits.softmax", "probs = (logits / temperature).softmax"),
      ("temperature applied after",), "applies the temperature after the top-k/top-p filters", added="learner-reports"),
    M("generate", 'for _ in range(max_new_tokens):\n                logits = model(idx)[:, -1]                  # (B, V): the last position predicts the next token\n                next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)\n                idx = torch.cat((idx, next_id[:, None]), dim=1)',
      'while idx.shape[1] < prompt.shape[1] + max_new_tokens:\n                logits = model(idx)[:, -1]                  # (B, V): the last position predicts the next token\n                next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)\n                idx = torch.cat((prompt, next_id[:, None]), dim=1)',
      ("stopped the decoding",), "loops until a length that is never reached (appends to the prompt)",
      added="learner-reports",
      extra=""),
]
