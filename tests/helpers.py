"""Shapes shared by the tests: every axis a different size, so a transpose
or a reduction over the wrong axis cannot pass by accident (batch 3, seq 11,
query heads 4, kv heads 2, head_dim 10, d_model 40, d_ff 128, vocab 256)."""
BATCH, SEQ = 3, 11
