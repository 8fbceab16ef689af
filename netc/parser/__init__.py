"""Model source → IR. The only place that knows Python syntax."""

from netc.parser.tracer import parse_file

__all__ = ["parse_file"]
