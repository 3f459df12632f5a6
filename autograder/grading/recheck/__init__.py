"""The trusted out-of-process recheck of one submission.

The notebook kernel's verdict can be bent by the code it grades (patched
torch.allclose, a Tensor subclass, an __eq__ that is always true, an AST
transformer stripping asserts, expected values read from the check's frame).
So the grade worker asks a second opinion, with the roles split:

* a trusted process (run.py, with parent.py) executes the course's own
  setup cells and the full test cells, hidden tests included, taken from
  solutions/, not from the submission. The learner's functions in that
  namespace are proxies;
* an untrusted child (child.py), in a jail (autograder.grading.sandbox.jail),
  executes the setup cells, the answer cells, whose source the parent extracted from the
  submitted notebook by grade id, and the code cells the learner added
  (helpers), in notebook order; the course's own demo cells and test cells
  do not run there, and no learner cell ever runs in the parent. A proxy
  call sends the arguments to the child, the child calls the learner's
  function and sends the result back as plain data (tensors, numbers,
  strings, tuples, lists, dicts) that the parent loads with
  torch.load(weights_only=True), after checking from the archive's zip
  directory that it decodes to at most MAX_FRAME_BYTES (load_plain).

The comparison (allclose, shapes, variants) therefore runs in a process the
learner's code never touched, on values it never saw the expected side of.
Callables passed by a check run in the parent (the child calls back), and
nn.Module arguments travel to the child and their parameters, including
which ones are shared, come back after the call (with an optimizer among the
arguments, a training step: the optimizer travels with its module, the
check's random state and the parameters' .grad go along, and the optimizer's
state and the .grad come back). A module the learner's code
returns (e.g. from its class) stays in the child; the parent gets a stand-in
with the same parameters whose forward runs in the child. Parameter names
from the child are accepted only where the parent knows them (the module
argument's own names before the call) or, for a module built in the child,
as dotted identifiers without a leading underscore. A check that needs
more of a learner's module than its parameters and forward makes the exercise
"not rechecked": the grade scores it zero and flags it for a hand regrade,
never a silent pass. A learner's request that the parent cannot serve (a
module handed to the check's callback or model) is answered with an error
that the learner's code sees; it never raises through the check itself.
The parent itself runs under an address-space limit (limit_memory).

The check's own model and KV cache (tinylm.Transformer, tinylm.KVCache)
never leave the parent: the child gets remote objects whose calls and
attribute reads run on the parent's objects, with the child's gradient mode.
So forward hooks, train/eval mode and the cache's state that a check watches
(generation, evaluation) are observed in the trusted process. The learner's
code may use only the names in REMOTE_NAMES on them; any other fails the
exercise in the recheck, with a message that names it (a hand regrade may
be due; a "not rechecked" here would let a submission opt out on purpose).

Modules: protocol (what crosses, and how a reply is decoded), child (the
jailed side), parent (proxies and what the trusted side accepts back), run
(the recheck of one submission, and its process's main):

    python -m autograder.grading.recheck ASSIGNMENT NOTEBOOK [--timeout S] [--memory-mb MB]   (prints JSON)
"""