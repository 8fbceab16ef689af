"""Seeded mutations of model files, for the fuzzer in test_fuzz.py.

`mutant(seed, index)` is a pure function of its arguments: the same pair gives the same bytes
on every machine, so a crash is reproduced from the two numbers in the failure message.
"""

from __future__ import annotations

import io
import keyword
import random
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted([*ROOT.glob("examples/*.py"), *ROOT.glob("tests/models/*.py")])


@dataclass(frozen=True)
class Mutant:
    seed: int
    index: int
    base: str  # the corpus file it came from, relative to the repository
    kinds: tuple[str, ...]
    data: bytes

    @property
    def name(self) -> str:
        return f"m{self.seed}_{self.index}"

    def describe(self) -> str:
        return f"mutant seed={self.seed} index={self.index} of {self.base} ({', '.join(self.kinds)})"


def mutant(seed: int, index: int) -> Mutant:
    rng = random.Random(f"netc-fuzz:{seed}:{index}")
    base = rng.choice(CORPUS)
    text = base.read_text(encoding="utf-8")
    kinds = []
    names = sorted(MUTATIONS)
    weights = [WEIGHTS.get(k, 1.0) for k in names]
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        kind = rng.choices(names, weights)[0]
        text = MUTATIONS[kind](rng, text)
        kinds.append(kind)
    data = text.encode("utf-8", errors="surrogateescape")  # raw bytes travel as lone surrogates
    return Mutant(seed, index, str(base.relative_to(ROOT)), tuple(kinds), data)


# --- helpers ------------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    """Lines with their ends, broken at \n only (as `tokenize` reads a StringIO)."""
    return re.split(r"(?<=\n)(?=.)", text, flags=re.S) or [""]


def _tokens(text: str, kinds: set[int]) -> list[tokenize.TokenInfo]:
    """Tokens of the given kinds (those before the first tokenize error, if the text is broken)."""
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in kinds and tok.start[0] == tok.end[0]:
                found.append(tok)
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def _replace_token(text: str, tok: tokenize.TokenInfo, new: str) -> str:
    lines = _lines(text)
    (row, col), (_, end) = tok.start, tok.end
    line = lines[row - 1]
    lines[row - 1] = line[:col] + new + line[end:]
    return "".join(lines)


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _insert_line(rng: random.Random, text: str, stmt: str) -> str:
    """`stmt` as a new line after a random line, indented like it."""
    lines = _lines(text)
    i = rng.randrange(len(lines))
    indent = _indent_of(lines[i])
    if lines[i].rstrip().endswith(":"):
        indent += "    "
    new = "".join(indent + s + "\n" for s in stmt.split("\n"))
    if not lines[i].endswith("\n"):
        lines[i] += "\n"
    lines.insert(i + 1, new)
    return "".join(lines)


def _names(text: str) -> list[tokenize.TokenInfo]:
    return [t for t in _tokens(text, {tokenize.NAME}) if t.string.isidentifier() and not keyword.iskeyword(t.string)]


# --- mutations ----------------------------------------------------------------------------


def delete_lines(rng: random.Random, text: str) -> str:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    del lines[i : i + rng.choice((1, 1, 1, 2, 3))]
    return "".join(lines)


def duplicate_lines(rng: random.Random, text: str) -> str:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    n = rng.choice((1, 1, 2, 3))
    lines[i:i] = lines[i : i + n] * rng.choice((1, 1, 2, 5))
    return "".join(lines)


def swap_lines(rng: random.Random, text: str) -> str:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    j = min(i + 1, len(lines) - 1) if rng.random() < 0.6 else rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def reindent_line(rng: random.Random, text: str) -> str:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    line = lines[i]
    if rng.random() < 0.5:
        lines[i] = rng.choice(("    ", "  ", "\t", " ")) + line
    else:
        lines[i] = line.lstrip(" \t") if rng.random() < 0.5 else line[rng.randint(1, 4) :]
    return "".join(lines)


def rename_identifier(rng: random.Random, text: str) -> str:
    names = _names(text)
    if not names:
        return text
    tok = rng.choice(names)
    others = sorted({t.string for t in names} - {tok.string})
    new = rng.choice(
        [
            *(others[:1] and [rng.choice(others)]),
            tok.string + "_x",
            rng.choice(("self", "batch", "time", "network", "output", "B", "torch", "nn", "forward", "_modules")),
            rng.choice(("data", "classes", "losses", "input_dims", "out_time_lens", "x_lens", "None", "print")),
        ]
    )
    if rng.random() < 0.5:  # one occurrence, else every occurrence
        return _replace_token(text, tok, new)
    return re.sub(rf"\b{re.escape(tok.string)}\b", new, text)


def change_number(rng: random.Random, text: str) -> str:
    nums = _tokens(text, {tokenize.NUMBER})
    if not nums:
        return text
    new = rng.choice(
        (
            "0",
            "1",
            "-1",
            "2",
            "3",
            "0.5",
            "-0.0",
            "1e300",
            "1e400",
            "2**64",
            "10**20",
            "7",
            "100",
            "1_000",
            "0x7f",
            "1j",
        )
    )
    return _replace_token(text, rng.choice(nums), new)


def change_dims(rng: random.Random, text: str) -> str:
    """A dim declaration or use changed: another size, dynamic instead of static, another name."""
    decls = list(re.finditer(r"Dim\((\"[^\"]*\")(?:, *([^)]*))?\)", text))
    if decls and rng.random() < 0.6:
        m = rng.choice(decls)
        new = rng.choice(
            (
                f"Dim({m.group(1)})",
                f"Dim({m.group(1)}, {rng.choice((1, 2, 3, 5, 64, 0, -3))})",
                f"Dim({m.group(1)}, 2.5)",
                'Dim("time")',
                'Dim("batch")',
                "Dim()",
                f"Dim({m.group(1)}, {m.group(1)})",
                f"{rng.choice((2, 3, 0, -1))} * Dim({m.group(1)}, 4)",
            )
        )
        return text[: m.start()] + new + text[m.end() :]
    dims = sorted(set(re.findall(r"^(\w+) = (?:\w+\.)?Dim\(", text, re.M))) or ["batch"]
    names = [t for t in _names(text) if t.string in dims]
    if not names:
        return text
    return _replace_token(text, rng.choice(names), rng.choice([*dims, "2 * " + rng.choice(dims), "batch"]))


def truncate(rng: random.Random, text: str) -> str:
    return text[: rng.randrange(len(text) + 1)]


def raw_bytes(rng: random.Random, text: str) -> str:
    """Bytes that are not UTF-8 (as lone surrogates, written back as the raw bytes) or odd controls."""
    junk = rng.choice(
        (
            "\udcff",
            "\udcc3",
            "\udce9\udcff\udcfe",
            "\x00",
            "\r",
            "\x0c",
            "\x1b[0m",
            "\u2028",
            "\ufeff",
            "\udcef\udcbb",
        )
    )
    i = rng.randrange(len(text) + 1)
    if rng.random() < 0.2:
        i = 0
    return text[:i] + junk + text[i:]


def _deep(rng: random.Random, inner: str) -> str:
    n = rng.choice((5, 20, 31, 61, 100, 400, 1000, 1500))
    kind = rng.choice(("neg", "not", "paren", "list", "call", "add", "attr", "sub", "str", "lambda", "ternary", "pow"))
    return {
        "neg": "-" * n + inner,
        "not": "not " * n + inner,
        "paren": "(" * n + inner + ")" * n,
        "list": "[" * n + inner + "]" * n,
        "call": "tanh(" * n + inner + ")" * n,
        "add": " + ".join([inner] * n),
        "attr": inner + ".b" * n,
        "sub": inner + "[0]" * n,
        "str": " ".join(['"a"'] * n),
        "lambda": "lambda: " * n + inner,
        "ternary": f"{inner} if True else " * n + inner,
        "pow": "**".join([inner] * n),
    }[kind]


def deep_nesting(rng: random.Random, text: str) -> str:
    names = _names(text)
    if rng.random() < 0.25:  # nested blocks or a long elif chain
        n = rng.choice((5, 25, 60, 101, 400))
        if rng.random() < 0.5:
            stmt = "\n".join("    " * i + "if True:" for i in range(n)) + "\n" + "    " * n + "pass"
        else:
            stmt = "if False:\n    pass\n" + "elif False:\n    pass\n" * n + "else:\n    pass"
        return _insert_line(rng, text, stmt)
    if not names:
        return text
    tok = rng.choice(names)
    return _replace_token(text, tok, _deep(rng, tok.string))


def huge_literal(rng: random.Random, text: str) -> str:
    r = rng.random()
    if r < 0.3:  # compile-time arithmetic that explodes
        stmt = "A = 3\n" + "A = A * A\n" * rng.choice((10, 40, 70))
        lines = _lines(text)
        i = next((k for k, line in enumerate(lines) if line.startswith(("time", "feat", "hidden"))), 0)
        lines.insert(i, stmt)
        return "".join(lines)
    nums = _tokens(text, {tokenize.NUMBER})
    new = rng.choice(
        (
            "9" * rng.choice((20, 101, 4300, 5000)),
            "0x" + "f" * rng.choice((20, 2000)),
            "1" + "0" * 400 + ".0",
            "1e" + "9" * 30,
            "1" + "_000" * 50,
        )
    )
    if not nums:
        return _insert_line(rng, text, f"n = {new}")
    return _replace_token(text, rng.choice(nums), new)


_LOOKALIKES = {
    "h": "ｈ",
    "x": "ｘ",
    "t": "ｔ",
    "o": "ℴ",
    "f": "ｆ",
    "i": "ｉ",
    "n": "ｎ",
    "e": "ｅ",
    "a": "ª",
    "s": "ｓ",
    "c": "ｃ",
    "l": "ℓ",
}


def unicode_identifier(rng: random.Random, text: str) -> str:
    names = _names(text)
    if not names:
        return text
    tok = rng.choice(names)
    s = tok.string
    r = rng.random()
    if r < 0.5:  # NFKC lookalikes: the same name to Python
        new = "".join(_LOOKALIKES.get(ch, ch) if rng.random() < 0.5 else ch for ch in s)
        if new == s:
            new = "ﬁ" + s if rng.random() < 0.5 else s + "ｘ"
    elif r < 0.7:  # characters Python rejects in identifiers
        new = s + rng.choice(("²", "€", "·", "\u200b", "☃", "\u0301"))
    elif r < 0.85:
        new = rng.choice(("ｉｆ", "ｄｅｆ", "ｒｅｔｕｒｎ", "ｆｏｒ"))  # normalise to keywords
    else:
        new = rng.choice(("名前", "héllo", "Ωmega", "x\u0301", "ſelf"))
    if rng.random() < 0.5:
        return _replace_token(text, tok, new)
    return re.sub(rf"\b{re.escape(s)}\b", new, text)


def change_string(rng: random.Random, text: str) -> str:
    """A string literal (a dim name, an output key, a loss name) with other contents."""
    strs = [t for t in _tokens(text, {tokenize.STRING}) if not t.string.startswith(('"""', "'''"))]
    if not strs:
        return text
    new = rng.choice(
        ('""', '"a b"', '"a_b"', '"x²"', '"2*hidden"', '"enc-time"', '"output"', '"data"', '"classes"', "1", "None")
    )
    return _replace_token(text, rng.choice(strs), new)


def delete_token(rng: random.Random, text: str) -> str:
    toks = _tokens(text, {tokenize.OP, tokenize.NAME, tokenize.NUMBER, tokenize.STRING})
    if not toks:
        return text
    tok = rng.choice(toks)
    if rng.random() < 0.5:
        return _replace_token(text, tok, "")
    return _replace_token(text, tok, tok.string + " " + rng.choice(toks).string)


_SNIPPETS = (
    "return {1: x}",
    "return {(1, 2): x}",
    "return {None: x}",
    "y = 1 / 0",
    "y = 1.0 / 0.0",
    "y = -(1e308 * 10)",
    "y = int(1e300)",
    "y = x[0]",
    "y = x.max_seq_len * 10**18 * 10**18",
    "y = {[]: 1}",
    "y = {}[[1]]",
    "mark_as_loss(x, 1)",
    "for q in 5:\n    pass",
    "for q in range(0):\n    pass",
    "while True:\n    pass",
    "import netc as nc",
    "from netc import *",
    "y = split(x, 0)",
    "y = split(x, -1)",
    "y = split(x, [])",
    "y = concat(x)",
    "y = reduce_sum(x, axis=[])",
    "y = dot(x, x, reduce=[])",
    "y = full(batch, value=float('nan'))",
    "y = zeros()",
    "y = Linear(0)(x)",
    "del x",
    "global x",
    "assert x",
    "y = lambda: x",
    "y = [q for q in x]",
    "y = x if x else x",
    "y = (yield x)",
    "async def q():\n    pass",
    "@network\ndef other(x: Tensor[batch]):\n    return x",
    "class C(Module):\n    def __call__(self, x):\n        return self(x)",
    "def rec(x):\n    return rec(x)",
)


def insert_snippet(rng: random.Random, text: str) -> str:
    return _insert_line(rng, text, rng.choice(_SNIPPETS))


def exponential_helpers(rng: random.Random, text: str) -> str:
    """Helpers that each call the next one twice: 2**n inlined calls."""
    n = rng.choice((5, 16, 30))
    defs = "def g0(x):\n    return tanh(x)\n" + "".join(
        f"\n\ndef g{i}(x):\n    return g{i - 1}(g{i - 1}(x))\n" for i in range(1, n + 1)
    )
    lines = _lines(text)
    i = next((k for k, line in enumerate(lines) if line.startswith("@network")), len(lines))
    lines.insert(i, defs + "\n\n")
    text = "".join(lines)
    m = re.compile(r"^[ \t]+return (\{\s*\"\w+\": )?", re.M).search(text, text.find("@network"))
    if m is None:
        return text
    return text[: m.end()] + re.sub(r"^([a-z_]\w*)", rf"g{n}(\1)", text[m.end() :], count=1)


_OP_GROUPS = (
    ("tanh", "sigmoid", "relu", "gelu", "exp", "log", "sqrt", "stop_gradient", "LayerNorm()"),
    ("reduce_sum", "reduce_mean", "reduce_max", "softmax", "log_softmax", "argmax"),
    ("zeros", "ones"),
    ("Linear", "Embedding", "Lstm"),
    ("concat", "split"),
    ("where", "dot", "cross_entropy"),
)


def replace_op(rng: random.Random, text: str) -> str:
    """One op call for another of its group (the arguments may no longer fit)."""
    group = {name: g for g in _OP_GROUPS for name in g}
    calls = [t for t in _names(text) if t.string in group]
    if not calls:
        return text
    tok = rng.choice(calls)
    new = rng.choice([n for n in group[tok.string] if n != tok.string])  # `LayerNorm()(x)` for `tanh(x)`
    return _replace_token(text, tok, new)


def replace_operator(rng: random.Random, text: str) -> str:
    ops = [t for t in _tokens(text, {tokenize.OP}) if t.string in ("+", "-", "*", "/", "<", ">", "==", "!=", "<=")]
    if not ops:
        return text
    return _replace_token(text, rng.choice(ops), rng.choice(("+", "-", "*", "/", "<", "==", "@", "**", "%", "//")))


def swap_args(rng: random.Random, text: str) -> str:
    """The first two arguments of a call swapped, or one dropped or repeated."""
    calls = list(re.finditer(r"\b(\w+)\(([^()]*?), ([^()]*?)([,)])", text))
    if not calls:
        return text
    m = rng.choice(calls)
    a, b = m.group(2), m.group(3)
    new = rng.choice((f"{b}, {a}", a, f"{a}, {a}, {b}", f"{a}, {b}, {b}"))
    return text[: m.start(2)] + new + text[m.end(3) :]


def duplicate_block(rng: random.Random, text: str) -> str:
    """A compound statement (a loop, an `if`, a def) repeated right after itself."""
    lines = _lines(text)
    heads = [i for i, line in enumerate(lines) if re.match(r"\s*(for|if|while|def|class)\b.*:\s*$", line)]
    if not heads:
        return text
    i = rng.choice(heads)
    indent = len(_indent_of(lines[i]))
    j = i + 1
    while j < len(lines) and (not lines[j].strip() or len(_indent_of(lines[j])) > indent):
        j += 1
    lines[j:j] = lines[i:j]
    return "".join(lines)


def early_return(rng: random.Random, text: str) -> str:
    names = sorted({t.string for t in _names(text)}) or ["x"]
    value = rng.choice((rng.choice(names), f'{{"output": {rng.choice(names)}}}', "None", "1"))
    return _insert_line(rng, text, f"return {value}")


_TEMPLATES = (
    "{v} = {v} + {w}",
    "{v} = -{v} * 0.5",
    "{v} = _nc.tanh({v})",
    "{v} = _nc.where({v} > 0.0, {v}, {w})",
    "{v} = _nc.stop_gradient({v})",
    "{v} = _nc.dropout({v}, 0.1)",
    "{v} = _nc.cast({v}, 'int32')",
    "{v} = _nc.reduce_sum({v}, axis={d})",
    "{v} = _nc.reduce_max({v}, axis=[{d}, {e}])",
    "{v} = _nc.softmax({v}, axis={d})",
    "{v} = _nc.argmax({v}, axis={d})",
    "{v} = _nc.concat({v}, {w})",
    "{v}, {w} = _nc.split({v}, 2)",
    "{v} = _nc.dot({v}, {w}, reduce={d})",
    "{v} = _nc.Linear({d})({v})",
    "{v} = _nc.LayerNorm()({v})",
    "{v} = _nc.zeros(batch, {d})",
    "{v} = _nc.full(batch, {d}, value=2.0)",
    "_nc.mark_as_loss({v}, 'fuzz_loss')",
    "{v} = _nc.expand({v}, {d})",
    "ys_ = []\nfor {v}_t in {v}:\n    ys_.append(_nc.tanh({v}_t))\n{v} = _nc.stack(ys_)",
    "for {v}_t in _nc.unstack({v}, axis={d}):\n    {w} = {w} + {v}_t",
    "for {v}_t in reversed({v}):\n    {w} = {v}_t",
    "for t_ in range({v}.max_seq_len):\n    {w} = {v}[t_]",
    "if _nc.reduce_sum({v}, axis={d}) > 0.0:\n    {w} = {v}\nelse:\n    {w} = -{v}",
    "while True:\n    {v} = _nc.tanh({v})\n    if _nc.end(_nc.reduce_max({v}, axis={d}) > 0.5):\n        break",
)


def template_statement(rng: random.Random, text: str) -> str:
    """A statement made of the network's own variables and the file's dims (through
    `import netc as _nc`), put before a statement of the network function's body."""
    lines = _lines(text)
    net = next((i for i, line in enumerate(lines) if line.startswith("@network")), None)
    if net is None:
        return text
    body = [i for i in range(net + 2, len(lines)) if lines[i].strip() and _indent_of(lines[i])]
    if not body:
        return text
    fn = "".join(lines[net:])
    dims = sorted(set(re.findall(r"^(\w+) = (?:\w+\.)?Dim\(", text, re.M))) or ["batch"]
    values = sorted(set(re.findall(r"^\s+(\w+) = ", fn, re.M)) | set(re.findall(r"(\w+): \w+\[", fn))) or ["x"]
    stmt = rng.choice(_TEMPLATES).format(
        v=rng.choice(values), w=rng.choice(values), d=rng.choice(dims), e=rng.choice(dims)
    )
    at = rng.choice(body)
    indent = _indent_of(lines[at])
    lines.insert(at, "".join(indent + part + "\n" for part in stmt.split("\n")))
    return "import netc as _nc\n" + "".join(lines)


MUTATIONS: dict[str, Callable[[random.Random, str], str]] = {
    f.__name__: f
    for f in (
        delete_lines,
        duplicate_lines,
        swap_lines,
        reindent_line,
        rename_identifier,
        change_number,
        change_dims,
        truncate,
        raw_bytes,
        deep_nesting,
        huge_literal,
        unicode_identifier,
        change_string,
        delete_token,
        insert_snippet,
        exponential_helpers,
        replace_op,
        replace_operator,
        swap_args,
        duplicate_block,
        early_return,
        template_statement,
    )
}
# how often each kind is drawn (else 1): mutants that run into the tracing limits take seconds
# each; statements made of the file's own names often still compile, reaching passes and emitters
WEIGHTS = {"exponential_helpers": 0.3, "template_statement": 3.0}
