"""What every model of a topology document shares: camelCase aliases, strictness, serde names.

A leaf of ``streamapp.topology`` (node models, store specs and window specs all build on it).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from streamapp.serdes import SERDE_NAMES, is_serde_name, registry_serde_name

__all__ = ["DescriptionModel", "SerdeName", "check_serde"]

SerdeName = Annotated[str, Field(min_length=1)]


class DescriptionModel(BaseModel):
    """Base of every document model: camelCase aliases, unknown fields rejected, immutable."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


def check_serde(value: str) -> str:
    """Validator of serde name fields: ``value`` if it names a known serde, else ValueError."""
    if value not in SERDE_NAMES and not is_serde_name(value):  # is_serde_name: windowed, Schema Registry serdes
        registry_serde_name(value)  # a malformed avro:/protobuf: name raises its own SerdeError (a ValueError)
        raise ValueError(f"unknown serde '{value}'; known serdes: {', '.join(SERDE_NAMES)}, see docs/serdes.md")
    return value
