"""``streamapp.processor`` is the public Processor API, re-exported from ``streamapp``."""

from __future__ import annotations

import pytest
import streamapp
from streamapp import processor


def test_processor_api_names_are_public_from_the_package() -> None:
    for name in ("Processor", "ProcessorContext", "PunctuationType", "Record"):
        assert name in streamapp.__all__
        assert getattr(streamapp, name) is getattr(processor, name)


def test_a_processor_must_implement_process() -> None:
    class Empty(processor.Processor):
        pass

    with pytest.raises(TypeError, match="abstract"):
        Empty()  # type: ignore[abstract]


def test_dsl_handles_are_public() -> None:
    for name in ("KStream", "KTable", "KGroupedStream", "KGroupedTable"):
        assert name in streamapp.__all__
        assert getattr(streamapp, name).__module__.startswith("streamapp.dsl.")
