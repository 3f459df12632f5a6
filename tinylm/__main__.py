"""Command line: python -m tinylm train | sample | eval | chat | experiment.

    python -m tinylm train                      # notebook-09 preset on the course corpus
    python -m tinylm train --text novel.txt --steps 3000 --out checkpoints/novel.pt
    python -m tinylm sample --prompt "Once upon a time" --temperature 0.8
    python -m tinylm eval                       # validation loss, perplexity, bits/byte vs baselines
    python -m tinylm chat --prompt "What is the capital of France?"   # SmolLM2-135M-Instruct in tinylm
    python -m tinylm experiment positions --steps 1000 --out positions.png   # a notebook's experiment, longer

The course environment check is `python -m autograder doctor` (`make doctor`).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

DEFAULT_CHECKPOINT = "checkpoints/tinylm.pt"


def _add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--text", metavar="FILE", help="a UTF-8 text file instead of the course corpus")
    p.add_argument("--val-fraction", type=float, default=0.1,
                   help="with --text: the share at the end of the file used for validation (0.1)")
    p.add_argument("--corpus-seed", type=int, default=0, help="seed of the generated course corpus (0)")


def _add_device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", help="cpu, cuda, mps ... (default: tinylm.device(), or $TINYLM_DEVICE)")


def build_parser() -> argparse.ArgumentParser:
    from .presets import PRESETS

    parser = argparse.ArgumentParser(prog="python -m tinylm",
                                     description="Train, sample from and evaluate tinylm models.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    t = sub.add_parser("train", help="train a model and save a checkpoint")
    _add_data_args(t)
    t.add_argument("--preset", choices=sorted(PRESETS), default="nb09",
                   help="model and training configuration to start from (nb09)")
    for flag, kind in (("--d-model", int), ("--n-layers", int), ("--n-heads", int),
                       ("--n-kv-heads", int)):
        t.add_argument(flag, type=kind, help="override the preset's model size")
    for flag, kind in (("--steps", int), ("--batch-size", int), ("--seq-len", int), ("--lr", float),
                       ("--warmup-steps", int), ("--eval-every", int), ("--seed", int)):
        t.add_argument(flag, type=kind, help="override the preset's training option")
    t.add_argument("--time-limit", type=float, help="stop after this many seconds of training")
    t.add_argument("--out", default=DEFAULT_CHECKPOINT, help=f"checkpoint path ({DEFAULT_CHECKPOINT})")
    t.add_argument("--resume", action="store_true",
                   help="continue the run saved at --out with its saved training options; "
                        "--steps, --lr, ... given here override them (e.g. --steps 3000 to train further)")
    t.add_argument("--compile", action="store_true",
                   help="run the model through torch.compile (costs time before the first step; see README)")
    t.add_argument("--checkpoint-every", type=int, help="also save every N steps")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_device_arg(t)

    s = sub.add_parser("sample", help="generate text from a checkpoint")
    s.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    s.add_argument("--prompt", default="Once upon a time")
    s.add_argument("--max-new-tokens", type=int,
                   help="default: as many as fit in the model's max_seq_len")
    s.add_argument("--temperature", type=float, default=0.8, help="0 = greedy (0.8)")
    s.add_argument("--top-k", type=int)
    s.add_argument("--top-p", type=float)
    s.add_argument("--seed", type=int, default=0)
    _add_device_arg(s)

    e = sub.add_parser("eval", help="loss, perplexity and bits/byte of a checkpoint")
    e.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    _add_data_args(e)
    e.add_argument("--split", choices=("val", "train"), default="val")
    e.add_argument("--batch-size", type=int, default=32)
    e.add_argument("--seq-len", type=int, help="window length (default: the model's max_seq_len)")
    _add_device_arg(e)

    c = sub.add_parser("chat", help="talk to SmolLM2-135M-Instruct's real weights running in tinylm",
                       description="One answer to --prompt, or else one answer per message read from stdin "
                                   "(each starts a new conversation): at a terminal with line editing "
                                   "and history, Ctrl-C stopping an answer, Ctrl-D or /exit leaving; "
                                   "from a pipe, one message per line.")
    c.add_argument("--prompt", help="answer this message and exit")
    c.add_argument("--system", help="the system message (default: SmolLM2's own)")
    c.add_argument("--max-new-tokens", type=int, default=256, help="longest answer in tokens (256)")
    # SmolLM2's model card suggests temperature 0.2 with top-p 0.9.
    c.add_argument("--temperature", type=float, default=0.2, help="0 = greedy (0.2)")
    c.add_argument("--top-k", type=int)
    c.add_argument("--top-p", type=float, default=0.9, help="(0.9; 1 turns it off)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--threads", type=int,
                   help="torch threads for decoding (default: one per core left idle by the load average)")
    c.add_argument("--compile", action="store_true",
                   help="decode with torch.compile(model): the same forward, compiled (needs a C++ compiler on "
                        "CPU; the first answer waits for the compile, minutes on a 2-core machine)")
    _add_device_arg(c)
    _add_experiment_parser(sub)
    return parser


def _add_experiment_parser(sub) -> None:
    from .experiments import EXPERIMENTS, SMALL_TRAIN

    listed = "\n".join(f"  {name:<17} {_first_paragraph(EXPERIMENTS[name][0])}" for name in sorted(EXPERIMENTS))
    x = sub.add_parser(
        "experiment", help="rerun one of the notebooks' experiments, with a progress bar and its plot",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Rerun one of the notebooks' experiments: small models trained side by side on the same batches "
                    "(same seed, same steps), differing in one choice. Prints each arm's final validation loss and "
                    "saves the plot.\n\nexperiments:\n" + listed,
        epilog="example: python -m tinylm experiment norms --steps 1000 --seed 1   (a longer run, another seed)")
    x.add_argument("name", choices=sorted(EXPERIMENTS), metavar="NAME", help="which experiment (listed above)")
    x.add_argument("--steps", type=int, help=f"training steps of every arm (default: the notebook's, {SMALL_TRAIN.steps})")
    x.add_argument("--seed", type=int, default=0, help="initial weights and batches of every arm (0): rerun with "
                                                        "another to see how far a result moves")
    x.add_argument("--out", default=None, help="save the plot to this file (default: experiment_NAME.png)")
    _add_data_args(x)


def _first_paragraph(function) -> str:
    """The first paragraph of a function's docstring, on one line."""
    return " ".join((function.__doc__ or "").strip().split("\n\n")[0].split())


def _corpus(args):
    from .data import course_corpus, load_text

    if args.text:
        return load_text(args.text, val_fraction=args.val_fraction)
    return course_corpus(seed=args.corpus_seed)


def _device(args):
    import torch

    from .device import device

    return torch.device(args.device) if args.device else device(verbose=False)


def _report(corpus, loss: float) -> str:
    """One line per reference: the floor and the baselines, next to `loss`."""
    lines = [f"  model      {loss:.4f} nats/byte"]
    for name, value in corpus.baselines().items():
        if value is not None:
            lines.append(f"  {name:<10} {value:.4f} nats/byte   (model - {name}: {loss - value:+.4f})")
    return "\n".join(lines)


def cmd_train(args) -> int:
    import torch

    from .model import Transformer
    from .presets import PRESETS
    from .training import Trainer

    model_config, train_config = PRESETS[args.preset]
    model_over = {k: getattr(args, k) for k in ("d_model", "n_layers", "n_heads", "n_kv_heads")
                  if getattr(args, k) is not None}
    train_over = {k: getattr(args, k) for k in ("steps", "batch_size", "seq_len", "lr",
                                                 "warmup_steps", "eval_every", "seed")
                  if getattr(args, k) is not None}
    if "seq_len" in train_over and train_over["seq_len"] > model_config.max_seq_len:
        model_over["max_seq_len"] = train_over["seq_len"]
    if {"d_model", "n_heads"} & model_over.keys():
        model_over["head_dim"] = None  # derived again from the new sizes, not carried over from the preset
    model_config = dataclasses.replace(model_config, **model_over)
    corpus = _corpus(args)
    torch.manual_seed(train_over.get("seed", train_config.seed))
    model = Transformer(model_config).to(_device(args))
    trainer = Trainer(model, corpus.train, corpus.val, train_config, compile=args.compile, **train_over)
    if args.resume:
        trainer.resume(args.out, **train_over)  # the saved options, except those given on the command line
    print(f"{corpus}\nmodel: {model.num_parameters():,} parameters, {model_config}", flush=True)
    trainer.run(time_limit=args.time_limit, quiet=args.quiet, checkpoint_path=args.out,
                checkpoint_every=args.checkpoint_every)
    h = trainer.history
    print(f"trained {trainer.step_count} steps in {trainer.elapsed:.1f} s; saved {args.out}")
    if h.val_loss:
        print(f"validation (first {trainer.config.eval_tokens:,} bytes):\n{_report(corpus, h.val_loss[-1])}")
    return 0


def cmd_sample(args) -> int:
    import torch

    from .sampling import generate
    from .tokenizer import ByteTokenizer
    from .training import load_model

    model = load_model(args.checkpoint, map_location=_device(args))
    tok = ByteTokenizer()
    prompt = tok.encode(args.prompt)
    if len(prompt) == 0:
        raise ValueError("--prompt must not be empty")
    room = model.config.max_seq_len - len(prompt)
    if room < 1:
        raise ValueError(f"--prompt is {len(prompt)} tokens (bytes) long, the model's max_seq_len is "
                         f"{model.config.max_seq_len}: no room for a new token; shorten --prompt")
    n = room if args.max_new_tokens is None else args.max_new_tokens
    generator = torch.Generator(device=next(model.parameters()).device).manual_seed(args.seed)
    out = generate(model, prompt, n, temperature=args.temperature, top_k=args.top_k,
                   top_p=args.top_p, generator=generator)
    print(tok.decode(out.cpu()))
    return 0


def cmd_eval(args) -> int:
    from .evaluation import evaluate
    from .training import load_model

    model = load_model(args.checkpoint, map_location=_device(args))
    corpus = _corpus(args)
    result = evaluate(model, getattr(corpus, args.split), batch_size=args.batch_size,
                      seq_len=args.seq_len)
    print(f"{corpus}\n{args.split}: {result}\n{_report(corpus, result.loss)}")
    return 0


def cmd_chat(args) -> int:
    import torch

    from .chat import PipedInput, TerminalInput, answer, choose_threads, run_session
    from .pretrained import load_pretrained

    if args.max_new_tokens < 1:
        raise ValueError(f"--max-new-tokens must be at least 1, got {args.max_new_tokens}")
    threads, why = choose_threads(args.threads)  # before the load, whose own work would count as load
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        model, tok = load_pretrained(device=_device(args))
        print(f"threads: {threads} ({why})", file=sys.stderr, flush=True)
        if args.compile:
            model = torch.compile(model)  # compiled lazily: the first prompt's graph and the one-token step's
            print("compiled decoding: the first answer starts after the compile", file=sys.stderr, flush=True)
        generator = torch.Generator(device=next(model.parameters()).device).manual_seed(args.seed)
        if args.prompt is not None:
            answer(model, tok, args.prompt, args, generator)
            return 0
        if sys.stdin.isatty():
            messages = TerminalInput()
            if not messages.editing:
                print("(no line editing: Python's readline module is not available here)", file=sys.stderr)
            print("Type a message and Enter (a paste of many lines is one message); Ctrl-C stops an answer, "
                  "Ctrl-D or /exit leaves.", file=sys.stderr, flush=True)
        else:
            messages = PipedInput()
        return run_session(model, tok, args, generator, messages)
    except KeyboardInterrupt:  # while loading, or between an answer and the next prompt
        print(file=sys.stderr)
        return 130
    finally:
        torch.set_num_threads(threads_before)  # main() may be called from a longer-lived program


def cmd_experiment(args) -> int:
    import matplotlib

    matplotlib.use("Agg")  # a file, no window
    import matplotlib.pyplot as plt

    from .experiments import EXPERIMENTS

    if args.steps is not None and args.steps < 1:
        raise ValueError(f"--steps must be a positive number of steps, got {args.steps}")
    run, plot = EXPERIMENTS[args.name]
    result = run(_corpus(args), steps=args.steps, seed=args.seed, progress=True)
    print(getattr(result, "curves", result).summary())
    plot(result)
    out = args.out or f"experiment_{args.name}.png"
    plt.gcf().tight_layout()
    plt.gcf().savefig(out, dpi=120)
    print(f"plot saved to {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from .pretrained import PretrainedUnavailable

    args = build_parser().parse_args(argv)
    commands = {"train": cmd_train, "sample": cmd_sample, "eval": cmd_eval, "chat": cmd_chat,
                "experiment": cmd_experiment}
    try:
        return commands[args.command](args)
    except (FileNotFoundError, ValueError, TypeError, FloatingPointError, PretrainedUnavailable) as err:
        # Bad paths and options: one clear line, not a traceback.
        print(f"python -m tinylm {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
