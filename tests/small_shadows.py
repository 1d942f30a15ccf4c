"""Hand-sized shadow statistics shared by the few-model attack tests: 4 shadows (two complementary pairs) × 3 documents."""
import numpy as np

SHADOW = np.array([[-10.0, -5.0, -20.0],
                   [-12.0, -6.5, -21.0],
                   [-11.0, -4.0, -19.0],
                   [-15.0, -7.0, -24.0]])
IN = np.array([[True, False, True],
               [False, True, False],
               [True, False, False],
               [False, True, True]])
