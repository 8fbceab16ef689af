"""Features whose programs fail on the current compiler: CI generates without them.

Each entry is feature -> the failure seen (tests/diffgen/found/ has shrunk models). When a fix
lands, remove its entry: CI then generates the construct. DOCUMENTED_REFUSALS are texts of
located errors for documented limitations (docs/language.md, Limitations): a program refused
with one of them counts as correct.
"""

KNOWN_FAILING: dict[str, str] = {}
# (eager's empty-list error is documented: an empty list read as a tensor where no stack of the
# compiled graph has its name)

DOCUMENTED_REFUSALS: tuple[str, ...] = ("RETURNN target",)

# errors eager mode raises for its documented limitations (docs/language.md, Limitations, Eager
# mode): counted as `refused`, with the detail "documented: ..."
DOCUMENTED_EAGER_ERRORS: tuple[str, ...] = (
    "cannot tell which loop a list of",
    "cannot tell which loop this list of",
    "eager mode cannot use an empty list as a tensor",
    "is assigned only in the body of a loop that ran no step for it",
    "the hypotheses of this beam search disagree on it",
)
