from polybus import use, wait

who = use("who")


def main(n: int = 40) -> list[list[int]]:
    return [list(v) for v in wait([who(i) for i in range(n)])]
