"""Block multiply server (Qureshi and Rashid's embarrassingly parallel matrix multiply):
a plain function, no polybus import."""


def multiply_block(rows, cols):
    """A block of rows of A times a block of columns of B: one block of C."""
    return rows @ cols
