"""Mistakes in notebook 10 (evaluation: nll_sum_and_count, evaluate, bigram_nll)."""
from . import Mutation

M = Mutation
RET = "return nll.item(), count"
MUTATIONS = [
    # nll_sum_and_count
    M("nll_sum_and_count", "count = int((targets != ignore_index).sum())", "count = targets.numel()", ("padding counted",),
      "counts the padding"),
    M("nll_sum_and_count", 'reduction="sum")', 'reduction="mean")', ("mean instead of sum",), "mean instead of sum"),
    M("nll_sum_and_count", RET, "return nll, count", ("item", "float"), "returns the NLL as a tensor"),
    M("nll_sum_and_count", "count = int((targets != ignore_index).sum())", "count = (targets != ignore_index).sum()",
      ("int",), "returns the count as a tensor"),
    M("nll_sum_and_count", "ignore_index=ignore_index,", "ignore_index=-100,", ("ignore_index",),
      "hard-codes -100 in the loss"),
    M("nll_sum_and_count", "count = int((targets != ignore_index).sum())", "count = int((targets != -100).sum())",
      ("ignore_index",), "hard-codes -100 in the count"),
    M("nll_sum_and_count", "ignore_index=ignore_index,\n", "\n", ("padding", "ignore_index"),
      "does not pass ignore_index to cross_entropy"),
    M("nll_sum_and_count", RET, "return nll.item() / math.log(2), count", ("bits", "ln 2"), "NLL in bits"),
    M("nll_sum_and_count", RET, "return count, nll.item()", ("swapped", "order"), "returns (count, nll)"),
    M("nll_sum_and_count", RET, "return -nll.item(), count", ("sign",), "returns the negative NLL (a log-likelihood)"),
    # evaluate
    M("evaluate", "    model.eval() ", "    pass ", ("dropout",), "no model.eval()"),
    M("evaluate", "with torch.no_grad():", "with torch.enable_grad():", ("no_grad", "autograd"), "records gradients"),
    M("evaluate", '"perplexity": math.exp(loss)', '"perplexity": 2 ** loss', ("2 ** loss",), "2 ** loss"),
    M("evaluate", "total, count = total + s, count + n", "total, count = total + s / n, count + 1", ("per-batch",),
      "mean of batch means"),
    M("evaluate", "loss / math.log(2) / bytes_per_token", "loss / math.log(2)", ("bytes_per_token",), "ignores bytes_per_token"),
    M("evaluate", "loss / math.log(2) / bytes_per_token", "loss * math.log(2) / bytes_per_token", ("ln 2",),
      "multiplies by ln 2"),
    M("evaluate", "loss / math.log(2) / bytes_per_token", "loss / math.log(2) * bytes_per_token", ("bytes_per_token",),
      "multiplies by bytes_per_token"),
    M("evaluate", "model.train(was_training)", "model.eval()", ("restore", "mode"), "leaves eval mode on"),
    M("evaluate", '"perplexity": math.exp(loss)', '"perplexity": torch.tensor(loss).exp()', ("float",),
      "perplexity as a tensor"),
    M("evaluate", "loss = total / count", "loss = total / len(batches)", ("number of batches", "tokens"),
      "divides by the number of batches"),
    M("evaluate", "return {", "return {'loss': loss, 'perplexity': math.exp(total), 'bits_per_byte': 0.0} or {",
      ("perplexity",), "exp of the summed NLL (and no bits per byte)"),
    M("evaluate", "total, count = total + s, count + n", "total, count = total + s, count + n  # unchanged",
      ("nll_sum_and_count",), "correct itself, but the nll_sum_and_count it calls (exercise 1) counts padding",
      extra="def nll_sum_and_count(logits, targets, ignore_index=-100):  # the learner's broken exercise 1\n"
            "    nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=ignore_index, reduction='sum')\n"
            "    return nll.item(), targets.numel()"),
    # bigram_nll
    M("bigram_nll", "(counts.sum(dim=1, keepdim=True) + 256 * alpha)", "(counts + alpha).sum()", ("whole table",),
      "joint normalisation"),
    M("bigram_nll", "counts.sum(dim=1, keepdim=True)", "counts.sum(dim=0, keepdim=True)", ("direction",), "normalises columns"),
    M("bigram_nll", "-probs.log()", "-probs.log2()", ("log base 2",), "log2"),
    M("bigram_nll", "+ 256 * alpha)", "+ alpha)", ("denominator",), "alpha once in the denominator"),
    M("bigram_nll", "train, val = train.long(), val.long()", "pass", ("uint8", ".long()"), "uint8 arithmetic overflows"),
    M("bigram_nll", "probs = (counts + alpha)", "alpha = 0.5\n    probs = (counts + alpha)", ("alpha",), "hard-codes alpha"),
    M("bigram_nll", "return -probs.log()[val[:-1], val[1:]].mean().item()", "return -probs.log()[val[:-1], val[1:]].mean()",
      ("float", "item"), "returns a tensor"),
    M("bigram_nll", "[val[:-1], val[1:]]", "[val[1:], val[:-1]]", ("direction", "swapped", "pairs"), "scores pairs backwards"),
]
