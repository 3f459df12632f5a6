"""Mistakes in notebook 09 (training: get_batch, lm_loss, lr_schedule, train_step, train_step_accumulated)."""
from . import Mutation

M = Mutation
RET = "return window[:, :-1], window[:, 1:]"
CE = "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)"
SHARE = "(summed / n_tokens).backward()"
CLIP_STEP = ("        total += summed.item()\n"
             "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient\n"
             "    optimizer.step()                                                  # once\n")
MUTATIONS = [
    # get_batch
    M("get_batch", RET, "return window[:, :-1], window[:, :-1]", ("not shifted",), "labels not shifted"),
    M("get_batch", RET, "return window[:, 1:], window[:, :-1]", ("wrong way", "swapped"), "x and y swapped"),
    M("get_batch", "window = data[idx].long()", "window = data[idx]", ("uint8", ".long()"), "no .long(): uint8 batches"),
    M("get_batch", "torch.randint(len(data) - seq_len,", "torch.randint(len(data) - seq_len - 1,", ("off by one",),
      "never draws the last window"),
    M("get_batch", "torch.randint(len(data) - seq_len,", "torch.randint(len(data) - seq_len + 1,", ("past the end", "off by one"),
      "draws a window that runs past the end"),
    M("get_batch", "(batch_size,), generator=generator)", "(batch_size,))", ("generator",), "ignores the generator"),
    M("get_batch", "idx = starts[:, None] + torch.arange(seq_len + 1)", "idx = starts[:, None] + torch.arange(seq_len + 2)",
      ("seq_len + 1 tokens",), "windows one too long, y shifted by two"),
    M("get_batch", "(batch_size,), generator=generator)", "(1,), generator=generator).expand(batch_size)",
      ("same start", "every row"), "one start for the whole batch"),
    M("get_batch", RET, "return window[:, :-1].float(), window[:, 1:].float()", ("float", "int64", "dtype"),
      "returns float tensors"),
    # lm_loss
    M("lm_loss", CE, "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100, reduction='sum')",
      ("summed",), "sums the loss"),
    M("lm_loss", CE, "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction='sum') / targets.numel()",
      ("padding counted",), "counts padding in the mean"),
    M("lm_loss", CE, "F.cross_entropy(logits.flatten(0, 1).softmax(-1), targets.flatten(), ignore_index=-100)",
      ("softmax",), "softmax before cross_entropy"),
    M("lm_loss", CE, "F.nll_loss(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)", ("log_softmax", "nll_loss"),
      "nll_loss on raw logits"),
    M("lm_loss", CE, "F.cross_entropy(logits[:, :-1].flatten(0, 1), targets[:, 1:].flatten(), ignore_index=-100)",
      ("shifted again",), "shifts again inside the loss"),
    M("lm_loss", CE, "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100).item()", ("float", "item"),
      "returns a float (no gradient)"),
    M("lm_loss", CE, "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100).detach()",
      ("differentiable", "detach"), "detaches the loss"),
    M("lm_loss", CE, "(F.cross_entropy(logits.transpose(1, 2), targets, reduction='none').sum(1) / (targets != -100).sum(1)).mean()",
      ("per-sequence",), "mean of per-sequence means"),
    # lr_schedule
    M("lr_schedule", "max_lr * (step + 1) / warmup_steps", "max_lr * step / warmup_steps", ("warmup starts at 0",),
      "warmup from 0"),
    M("lr_schedule", "total_steps - 1 - warmup_steps", "total_steps - warmup_steps", ("min_lr",), "decays one step too long"),
    M("lr_schedule", "(max_lr - min_lr)", "max_lr", ("min_lr",), "cosine to 0 plus min_lr"),
    M("lr_schedule", "if step < warmup_steps:", "if step <= warmup_steps:", ("warmup",), "warmup one step too long"),
    # the schedule's edges; the first two shipped (DeepSpeed's WarmupCosineLR, Composer's warmup schedulers)
    M("lr_schedule", "max(1, total_steps - 1 - warmup_steps)", "(total_steps - 1 - warmup_steps)",
      ("max(1, total_steps - 1 - warmup_steps)",), "divides by the decay's length, 0 when total = warmup + 1",
      added="real-world-edges"),
    M("lr_schedule", "    if step < warmup_steps:\n        return max_lr * (step + 1) / warmup_steps",
      "    warm = max_lr * (step + 1) / warmup_steps\n    if step < warmup_steps:\n        return warm",
      ("warmup_steps = 0",), "divides by warmup_steps outside the warmup branch: warmup 0 divides by zero",
      added="real-world-edges"),
    M("lr_schedule", "min(progress, 1.0)", "progress", ("not clamped",),
      "no clamp: past the last step the rate climbs back up the cosine", added="real-world-edges"),
    # train_step
    M("train_step", "    optimizer.zero_grad(set_to_none=True) ", "    pass ", ("zero_grad",), "no zero_grad"),
    M("train_step", "    model.train() ", "    pass ", ("eval mode", "train()"), "no model.train()"),
    M("train_step", "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)", "    pass", ("clip",), "no clipping"),
    M("train_step", "return loss.item()", "return loss", ("item", "float"), "returns the loss tensor"),
    M("train_step", "    optimizer.step() ", "    pass ", ("step()", "did not move"), "forgets optimizer.step()"),
    M("train_step", "    loss.backward() ", "    pass ", ("backward",), "forgets loss.backward()"),
    M("train_step", "    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n    loss.backward() ",
      "    loss.backward()\n    optimizer.zero_grad() ", ("zero_grad", "gradients were zero"),
      "zero_grad between backward and step: every gradient is erased"),
    M("train_step", "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)",
      "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", ("grad_clip",), "hard-codes the clip norm"),
    M("train_step", "loss = lm_loss(model(x), y) ", "loss = lm_loss(model(x), x) ", ("targets", "labels"),
      "scores the inputs"),
    M("train_step", "return loss.item() ", "return loss.item()  # unchanged", ("lm_loss",),
      "correct itself, but the lm_loss it calls (exercise 2) sums",
      extra="def lm_loss(logits, targets):  # the learner's broken exercise 2\n"
            "    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100, reduction='sum')"),
    # train_step_accumulated; the first shipped in Hugging Face transformers' Trainer (October 2024), the second
    # in the models its fix did not reach
    M("train_step_accumulated", SHARE, "(lm_loss(logits, y) / len(micro_batches)).backward()",
      ("mean of per-micro-batch means",), "each micro-batch's mean loss, divided by the number of micro-batches",
      added="real-world-edges"),
    M("train_step_accumulated", SHARE, "lm_loss(logits, y).backward()", ("not divided by the number of micro-batches",),
      "each micro-batch's mean loss backpropagated as it is", added="real-world-edges"),
    M("train_step_accumulated", CLIP_STEP,
      "        total += summed.item()\n"
      "        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)\n"
      "    optimizer.step()\n", ("clip_grad_norm_ runs before the last",), "clips inside the loop, each running sum",
      added="real-world-edges"),
    M("train_step_accumulated", "        logits = model(x)  ", "        optimizer.zero_grad()\n        logits = model(x)  ",
      ("zero_grad() runs inside the loop",), "zero_grad inside the loop: only the last micro-batch is left",
      added="real-world-edges"),
    M("train_step_accumulated", CLIP_STEP,
      "        total += summed.item()\n"
      "        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)\n"
      "        optimizer.step()\n", ("optimizer.step() runs",), "clips and steps after every micro-batch",
      added="real-world-edges"),
    M("train_step_accumulated", "optimizer.zero_grad(set_to_none=True)", "pass  # no zero_grad",
      ("no zero_grad() before the first",), "never zeroes the gradients: what .grad held is added",
      added="real-world-edges"),
    M("train_step_accumulated", "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)", "    pass",
      ("not clipped",), "no clipping", added="real-world-edges"),
]
