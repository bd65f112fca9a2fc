"""smax from Python: a batch of attention rows, then sampling.

    /usr/bin/python3 python/examples/attention_sampling.py

1. Scaled dot-product attention for 8 heads x 256 queries x 256 keys with a
   causal mask: the scores' softmax (float32, along the keys, in place, two
   threads) and, for comparison, a sparse 1.5-entmax attention whose rows
   keep only a few keys.
2. Sampling the next token from a vocabulary of 32000 logits for a batch of
   64 sequences with hard Gumbel-softmax (one seed, row r keyed by
   gumbel_row_seed(seed, r): reproducible on any ISA and thread count); the
   frequencies over many draws follow softmax(logits / tau).
"""
import numpy as np

import smax

rng = np.random.default_rng(0)

# 1. attention
heads, q, k, d = 8, 256, 256, 64
Q = rng.standard_normal((heads, q, d), dtype=np.float32)
K = rng.standard_normal((heads, k, d), dtype=np.float32)
V = rng.standard_normal((heads, k, d), dtype=np.float32)
scores = Q @ K.transpose(0, 2, 1) / np.float32(np.sqrt(d))
scores[:, np.triu_indices(q, 1)[0], np.triu_indices(q, 1)[1]] = -np.inf  # causal: -inf is masked
dense = scores.copy()
smax.softmax(dense, axis=-1, out=dense, threads=2)          # in place, rows of the (heads*q, k) view
out = dense @ V
sparse = smax.entmax15(scores, axis=-1)
assert np.allclose(dense.sum(-1), 1, atol=1e-5) and np.allclose(sparse.sum(-1), 1, atol=1e-5)
assert (dense[:, 0, 1:] == 0).all()                        # query 0 sees key 0 only
print(f"attention: {heads}x{q}x{k} on {smax.active_isa()}: output {out.shape}; "
      f"entmax15 keeps {np.count_nonzero(sparse) / np.count_nonzero(dense):.1%} of the keys softmax weighs")

# 2. sampling
vocab, batch, tau = 32000, 64, 0.8
logits = (2 * rng.standard_normal(vocab)).astype(np.float32)
rows = np.broadcast_to(logits, (batch, vocab))
tokens = smax.gumbel_softmax(rows, tau=tau, seed=1234, hard=True).argmax(-1)
again = smax.gumbel_softmax(rows, tau=tau, seed=1234, hard=True, threads=2).argmax(-1)
assert (tokens == again).all()                              # same seed, same tokens, any thread count
print(f"sampled tokens (first 8 of {batch}): {tokens[:8].tolist()}")

# the draws follow softmax(logits / tau): 200 batches of 64 over 5 categories
small = np.log(np.array([0.05, 0.1, 0.15, 0.3, 0.4], np.float32))
draws = np.concatenate([smax.gumbel_softmax(np.broadcast_to(small, (64, 5)), tau=1.0, seed=s, hard=True)
                        for s in range(200)])
freq = draws.mean(0)
print("frequencies", np.round(freq, 3), "expected", np.exp(small))
assert np.abs(freq - np.exp(small)).max() < 0.03
