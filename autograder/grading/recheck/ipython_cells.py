"""A notebook cell run the way the IPython kernel runs it, in the recheck's
jailed child: a cell that is not plain Python is transformed by IPython's
own input transformer (magics and shell escapes become get_ipython() calls),
and get_ipython() is, for that cell, a small stand-in (CellShell) that runs
what changes the learner's namespace and skips the rest:

- %time, %%time, %%capture, %prun, %%prun run their statement or body;
- display and timing magics (%matplotlib inline, %timeit, %%timeit, x?)
  change no value the checks read, and are skipped;
- shell escapes (!cmd, x = !cmd) and any other magic are not run in the
  grader: they are skipped and noted (NOTES), and the parent puts the note
  beside a verdict the cell could have changed, so a student whose answer
  needed them reads why, never a silent zero.
"""
from __future__ import annotations

# Magics whose statement (line) or body (cell) runs in the learner's namespace.
RUN = frozenset({"time", "capture", "prun"})
# Magics that only show or time something: skipping them changes no value.
DISPLAY_ONLY = frozenset({"matplotlib", "timeit", "pinfo", "pinfo2", "pdoc", "psource", "pdef", "config",
                          "precision", "load_ext", "autoreload", "aimport", "who", "whos", "who_ls", "history",
                          "lsmagic", "magic", "page", "pprint", "xmode", "debug", "pdb", "notebook", "colors"})
# What a note may say, by key; the parent accepts these keys only (the rest of a reply is the learner's).
NOTES = {
    "shell": "shell commands (lines starting with !) are not run by the grader's recheck",
    "magic": "IPython magics other than %time, %%time, %%capture, %prun and the display and timing ones are not "
             "run by the grader's recheck",
}


def source_to_run(source: str) -> str:
    """The Python text of a cell: the cell itself when it is Python, else
    what IPython's input transformer makes of it."""
    try:
        compile(source, "<cell>", "exec")
        return source
    except SyntaxError:
        return ipython_transformed(source)


def ipython_transformed(source: str) -> str:
    """What IPython's input transformer makes of a cell that is not Python."""
    from IPython.core.inputtransformer2 import TransformerManager  # only for a cell that needs it
    return TransformerManager().transform_cell(source)


class CellShell:
    """get_ipython() for one cell in the recheck child (see the module
    docstring); `notes` collects the NOTES keys of what it skipped."""

    def __init__(self, ns: dict, label: str):
        self.ns = ns
        self.label = label  # a cell magic's body keeps its lines' numbers in the cell (a trace names them)
        self.notes: set[str] = set()

    def _run(self, code: str):
        """A statement's value when it is an expression (x = %time f()), else run it."""
        text = source_to_run(code)
        try:
            compiled = compile(text, self.label, "eval")
        except SyntaxError:
            exec(compile(text, self.label, "exec"), self.ns)
            return None
        return eval(compiled, self.ns)

    def run_line_magic(self, name: str, line: str):
        if name in RUN:
            return self._run(line)
        if name not in DISPLAY_ONLY:
            self.notes.add("magic")
        return None

    def run_cell_magic(self, name: str, line: str, cell: str):
        if name in RUN:
            self._run("\n" + cell)
        elif name not in DISPLAY_ONLY:
            self.notes.add("magic")

    def system(self, command: str) -> None:
        self.notes.add("shell")

    def getoutput(self, command: str, split: bool = True) -> list:
        self.notes.add("shell")
        return []


def run_cell(source: str, label: str, ns: dict) -> list[str]:
    """Execute a cell in `ns` as the kernel would (see the module
    docstring); returns the NOTES keys of what was skipped. get_ipython is
    in `ns` only while a transformed cell runs (and its functions run
    later without it, as plain Python would)."""
    try:
        code = compile(source, label, "exec")
    except SyntaxError:  # not plain Python: IPython's transformer makes it so
        code = None
    if code is not None:
        exec(code, ns)
        return []
    text = ipython_transformed(source)
    shell = CellShell(ns, label)
    had = ns.get("get_ipython")
    ns["get_ipython"] = lambda: shell
    try:
        exec(compile(text, label, "exec"), ns)
    finally:
        if had is None:
            ns.pop("get_ipython", None)
        else:
            ns["get_ipython"] = had
    return sorted(shell.notes)
