"""What is fitted: the learners, the vocabulary steps before them, and the pipeline joining the two.

One module per learner family (``lda``, ``vb_lda``, ``cgs``, ``cgs_monitor``,
``dp_cgs``, ``dp_svi``, ``hdp_lda``, ``lp_lda``, ``poisson_factorization`` with
its ``bessel`` sampler, ``gensim_lda``, ``tomotopy_lda``); ``vocabulary`` and
``dpsu`` are the vocabulary steps; ``pipeline`` runs a step then a learner.
They are built by name through :mod:`topicaudit.targets.registry`.
"""
