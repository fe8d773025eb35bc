def main() -> None:
    return None
