"""What is claimed: guarantees, the mechanisms as dp-accounting events, and the accountants.

``guarantee`` (Adjacency, Basis, Guarantee), ``events`` (every mechanism as a
dp-accounting event), ``composition`` (a pipeline's guarantee from the
accountant) and ``dp_svi_accounting`` (the accountants of DP-SVI's
Poisson-subsampled Gaussian). Nothing here imports a learner.
"""
