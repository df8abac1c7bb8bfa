from typing import Any

def same_items(value: list[Any], start: int, mine: tuple[Any, ...] | list[Any], count: int, /) -> bool: ...

SOURCE_SHA256: str
