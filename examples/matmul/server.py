"""Matrix-multiply server (Schnaidt, Duman and Lewis): plain functions, no polybus import."""

import numpy as np


def multiply_row(row, b):
    """Stateless: one row of A and all of B arrive with every call."""
    return row @ b


def multiply_rows(rows, b):
    """A block of rows of A times B."""
    return rows @ b
