"""Mistakes in notebook 01 (embeddings, one-hot lookup, tied head)."""
from . import Mutation

M = Mutation
MUTATIONS = [
    M("embed", "return weight[ids]", "return weight[ids].detach()", ("does not depend on weight",),
      "detaches the lookup, so the embedding never trains"),
    M("tied_logits", "x @ weight.T", "x @ weight", ("transposed weight",), "forgets the transpose"),
]
