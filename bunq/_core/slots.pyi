"""Instances of a slotted class filled field by field in C."""

from collections.abc import Iterable, Mapping
from types import GenericAlias
from typing import Any, Generic, TypeVar, final

_T = TypeVar("_T")

@final
class SlotBuilder(Generic[_T]):
    def __init__(
        self, cls: type[_T], fields: Iterable[str], consts: Mapping[str, Any] | None = None
    ) -> None: ...
    def __call__(self, *values: Any) -> _T: ...
    def __class_getitem__(cls, item: Any, /) -> GenericAlias: ...
