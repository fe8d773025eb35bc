"""200x200 Mandelbrot in 200 row calls; the configuration decides where rows run."""

from polybus import use

mandel_row = use("mandel_row")


def main(width: int = 200, height: int = 200, maxiter: int = 256) -> int:
    rows = [mandel_row(y, width, height, maxiter) for y in range(height)]
    return sum(sum(r) for r in rows)  # total iterations: the same under every strategy
