"""netc's limits on model files: every compile ends in bounded time, memory and stack depth.

libcst and the tracer recurse on nesting and Python's stack is finite; inlining helpers can
grow a network exponentially; compile-time arithmetic has no size bound of its own. Each
limit is reported as a located error that names it. docs/language.md lists them for users.
"""

from __future__ import annotations

# --- the source text (checked on tokens, before libcst sees the file) ---------------------
MAX_SOURCE_BYTES = 1_000_000
MAX_TOKENS = 50_000  # libcst parses ~15,000 tokens a second
MAX_BRACKET_DEPTH = 30  # ( [ { nested in one another (Python's own parser stops at 200)
# brackets, plus the operators, attribute dots, keywords (`not`, `and`, `if`, `lambda`, ...) and
# closed brackets chained at each bracket level: a bound on the depth of the expression tree
MAX_EXPRESSION_DEPTH = 60
MAX_BLOCK_DEPTH = 20  # indented blocks in one another; each `elif` counts as one more level

# --- compile-time values ------------------------------------------------------------------
MAX_NUMBER_CHARS = 100  # digits of a number literal
MAX_INT = 2**63 - 1  # compile-time integers (literals and arithmetic) stay within int64

# --- tracing the network ------------------------------------------------------------------
MAX_CALL_DEPTH = 32  # helper functions and Module methods inlined within one another
MAX_NESTING = 150  # expressions and statements being evaluated within one another, across calls
MAX_TRACE_STEPS = 50_000  # expressions and statements evaluated, with every helper inlined
MAX_OPS = 5_000  # IR ops of one network after inlining
