"""Worked solutions to the notebooks' exercises, one module per notebook (nbNN.py)."""
