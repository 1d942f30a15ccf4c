"""How results are shown: the summary table printed after a run and the ROC figure (roc.png)."""
