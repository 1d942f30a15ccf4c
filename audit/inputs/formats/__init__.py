"""Readers of the corpus formats :func:`topicaudit.inputs.corpus.load_corpus` accepts, one module per format.

Text formats (``json``, ``folder``, ``20news``) return the documents' text
(or token lists) and a description; bag-of-words formats (``uci``, ``mm``)
return counts. Turning either into a :class:`~topicaudit.inputs.corpus.Corpus`
is :mod:`topicaudit.inputs.corpus`'s job.
"""
