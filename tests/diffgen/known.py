"""Features whose programs fail on the current compiler: CI generates without them.

Each entry is feature -> the failure seen (tests/diffgen/found/ has shrunk models; "repro X" names
a program of issue 32's bug classes). When a fix lands, remove its entry: CI then generates the
construct. DOCUMENTED_REFUSALS are texts of located errors for documented limitations
(docs/language.md, Limitations): a program refused with one of them counts as correct.
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


def documented(detail: str) -> bool:
    """A failure's detail that is a located error of a documented RETURNN-target limitation, or a
    documented eager error (the check marks those "documented: ...")."""
    if detail.startswith("documented: "):
        return True
    located = not detail.startswith("(no location)")
    return located and any(text in detail for text in DOCUMENTED_REFUSALS)
