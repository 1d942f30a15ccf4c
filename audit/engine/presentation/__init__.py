"""How results are shown: the summary table printed after a run (summary), the ROC figure (roc.png), and what
the figures mean (guidance)."""
