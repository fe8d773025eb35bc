"""One row of the Mandelbrot set (Kim and Purtilo's CORD paper, Table 1): escape counts,
pure Python."""


def mandel_row(y: int, width: int, height: int, maxiter: int,
               x0: float = -1.8, x1: float = 0.5, y0: float = -1.2, y1: float = 1.2) -> list[int]:
    ci = y0 + (y1 - y0) * y / max(1, height - 1)
    out = []
    for x in range(width):
        cr = x0 + (x1 - x0) * x / max(1, width - 1)
        zr = zi = 0.0
        n = 0
        while n < maxiter and zr * zr + zi * zi <= 4.0:
            zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
            n += 1
        out.append(n)
    return out
