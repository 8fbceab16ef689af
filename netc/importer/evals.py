"""`eval` layers: the `eval` string parsed with `ast` (never evaluated) and mapped to netc
expressions. Only a restricted language is understood: `source(i)`, numbers, `+ - * / **`
(a number as exponent), unary minus, the TF functions of `UNARY`, `BINARY`, `SOFTMAX` and RETURNN's
`safe_log`; anything else is a
refusal naming the layer and the part of the string it does not understand."""

from __future__ import annotations

import ast
import math

import libcst as cst

from netc.importer.arith import _ACTIVATION_FORMS
from netc.importer.dims import BATCH
from netc.importer.eval_tables import _INTEGER, AXIS_FUNCTIONS, BINARY, CASTS, COMPARISONS, LOGICAL, SOFTMAX, UNARY
from netc.importer.syntax import Expr, call, compare, name, num
from netc.importer.values import Refused, Val, feature

_BINOPS = {ast.Add: (cst.Add, 1), ast.Sub: (cst.Subtract, 1), ast.Mult: (cst.Multiply, 2), ast.Div: (cst.Divide, 2)}
_POW = 4


class EvalMapper:
    """One `eval` string of layer `full` over the values `srcs` (`source(i)`)."""

    def __init__(
        self,
        imp,
        full: str,
        code: str,
        srcs: list[Val],
        shown: str | None = None,
        feature_last: frozenset = frozenset(),
        layouts: dict[int, tuple[str, ...] | None] | None = None,
        own_layout: bool = False,
        weights: frozenset = frozenset(),
        in_loop: bool = False,
        int_labels: bool = False,
    ):
        self.imp, self.full, self.code, self.srcs = imp, full, code, srcs
        self.shown = shown or repr(code)  # how errors quote the eval (a config function's: what it computes)
        # TF axis numbers name axes of RETURNN's layout of the source, which netc's named dims do not
        # have: only `axis=-1` of sources whose layout has the feature axis last (`feature_last`: indices)
        self.feature_last = feature_last
        # RETURNN's layout of sources read `auto_convert=False` where netc knows it (index -> dims in
        # axis order): other axis numbers name its dims; `weights`: sources that are a
        # `softmax_over_spatial`'s weights (none below 0, padded frames 0)
        self.layouts, self.weights = layouts or {}, weights
        self.own_layout = own_layout  # a source read `auto_convert` keeps its layout (`layouts` holds)
        self.ordered: dict[int, tuple[str, ...]] = {}  # subexpression -> its dims in RETURNN's axis order
        self.argmaxed: dict[int, tuple[Expr, str]] = {}  # labels of an `argmax` -> (its input, the axis)
        self.nonneg_padded: set[int] = set()  # subexpressions of `weights`
        # `tf.cumsum` calls (ast nodes) of a `nonneg_padded` value -> the axis: past a sequence's end
        # each repeats its last valid frame's sum
        self.flat_padded: dict[int, str] = {}
        self.whole: set[int] = set()  # floats of labels (whole numbers)
        self.full_dims = max((v.dims for v in srcs), key=len) if srcs else ()
        # the dims and label dim of a subexpression whose dims are not the sources' broadcast
        self.meta: dict[int, tuple[tuple[str, ...], str | None]] = {}
        self.kept: set[str] = set()  # dims a `keepdims` reduction keeps (of size 1 in RETURNN)
        self.casting = False
        self.bools: set[int] = set()  # subexpressions that are bool (a comparison)
        # −inf (`float('-inf')`, plus TF's zeros of some dims: their dims) and +inf: netc's numbers
        # are finite, so only a `tf.where` branch may be −inf (`mask_inf`)
        self.neg_inf: dict[int, tuple[str, ...]] = {}
        self.pos_inf: set[int] = set()
        self.zeros: dict[int, tuple[str, ...]] = {}  # `tf.zeros_like(x)`: x's dims
        self.expanded: set[int] = set()  # `tf.expand_dims` (netc broadcasts by name): operands only
        self.keep: list[Expr] = []  # nodes left out of the result, alive so that their ids stay theirs
        # in a rec unit a step's layout (search's) is not RETURNN's training graph's, which computes
        # the layer over all frames at once: axis numbers read as the step's (`loop_axes`: where)
        self.in_loop, self.loop_axes = in_loop, []
        # an `out_type` of labels (`sparse`): label sources are their numbers (int32), whose `+ - *`,
        # `//`, `%` (`tf.floordiv`, `tf.floormod`) make the labels' numbers (a factored label's parts)
        self.int_labels = int_labels
        self.ints: set[int] = set()  # int32 subexpressions (labels' numbers)

    def dims(self, e: Expr, is_tensor: bool = True) -> tuple[tuple[str, ...], str | None]:
        """(dims, label dim) of a mapped subexpression."""
        if not is_tensor:
            return (), None
        return self.meta.get(id(e), (self.full_dims, None))

    def mark(self, e: Expr, dims: tuple[str, ...], sparse: str | None = None) -> Expr:
        self.meta[id(e)] = (tuple(dims), sparse)
        return e

    def result(self, expr: Expr) -> tuple[tuple[str, ...], str | None]:
        """The value's dims and label dim; refused where a `keepdims` reduction is the whole value."""
        dims, sparse = self.dims(expr)
        if set(dims) == set(self.full_dims):  # RETURNN's value has its widest source's layout (out_type's)
            dims = self.full_dims
        if any(k not in dims for k in self.kept):
            raise self.refuse("a reduction with `keepdims=True` as the layer's value (as an operand it is)")
        if id(expr) in self.expanded:
            raise self.refuse("`tf.expand_dims` as the layer's value (as an operand it is)")
        return dims, sparse

    def refuse(self, what: str) -> Refused:
        return Refused(self.full, "eval", f"eval {self.shown}: {what} not supported")

    def run(self) -> tuple[Expr, bool]:
        """The expression and whether it is a tensor (not a plain number)."""
        try:
            tree = ast.parse(self.code.strip(), mode="eval")
        except SyntaxError as e:
            raise Refused(self.full, "eval", f"eval {self.shown} is not a Python expression ({e.msg})") from None
        expr, prec, is_tensor = self.expr(tree.body)
        if id(expr) in self.neg_inf or id(expr) in self.pos_inf:
            raise self.refuse("an infinite value outside a `tf.where` branch")
        if not is_tensor:
            raise self.refuse("an expression that reads no `source(i)`")
        return expr, is_tensor

    def expr(self, node: ast.AST) -> tuple[Expr, int, bool]:
        """(syntax, its precedence, whether it is a tensor)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return num(node.value), 9 if node.value >= 0 else 3, False
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner, prec, t = self.expr(node.operand)
            if isinstance(node.op, ast.UAdd):
                return inner, prec, t
            if id(inner) in self.pos_inf:  # `-float('inf')`
                return self.infinite(-1, ()), 9, False
            if id(inner) in self.neg_inf:
                return self.infinite(1, ()), 9, False
            return self.like(cst.UnaryOperation(cst.Minus(), _paren(inner, prec < 3)), inner, t), 3, t
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            op, prec = _BINOPS[type(node.op)]
            (a, pa, ta), (b, pb, tb) = self.expr(node.left), self.expr(node.right)
            for x, y in ((a, b), (b, a)):
                if id(x) in self.neg_inf and isinstance(node.op, ast.Add) and id(y) in self.zeros:
                    # `-float('inf') + tf.zeros_like(x)`: −inf over x's dims (TF's broadcast)
                    return self.infinite(-1, self.zeros[id(y)]), 9, False
            if any(id(x) in self.neg_inf or id(x) in self.pos_inf for x in (a, b)):
                raise self.refuse(f"`{ast.unparse(node)}`: arithmetic on an infinite value")
            if self.int_operands(node, (node.left, a, ta), (node.right, b, tb)) and isinstance(node.op, ast.Div):
                raise self.refuse(f"`{ast.unparse(node)}`: `/` of labels' numbers (`//` is)")
            out = cst.BinaryOperation(_paren(a, pa < prec), op(), _paren(b, pb <= prec))
            out = self.broadcast(out, (a, ta), (b, tb))
            if not isinstance(node.op, ast.Div):
                out = self.whole_of(out, (node.left, a), (node.right, b))
            if id(a) in self.ints or id(b) in self.ints:
                self.ints.add(id(out))
            return out, prec, ta or tb
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            return self.pow(node.left, node.right)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv | ast.Mod):
            return self.int_division(node, node.op, node.left, node.right), 2, True
        raise self.refuse(f"`{ast.unparse(node)}`")

    def infinite(self, sign: int, dims: tuple[str, ...]) -> Expr:
        """±inf (over `dims`, where TF's zeros of them were added): a marker only a `tf.where`
        branch takes (`mask_inf`)."""
        out = call("float", cst.SimpleString("'-inf'" if sign < 0 else "'inf'"))
        self.keep.append(out)
        if sign < 0:
            self.neg_inf[id(out)] = dims
        else:
            self.pos_inf.add(id(out))
        return out

    def int_operands(self, node: ast.AST, *parts: tuple[ast.AST, Expr, bool]) -> bool:
        """Whether the operands are labels' numbers (and integers); refused where they mix with floats."""
        ints = [id(e) in self.ints for _, e, t in parts if t]
        if not any(ints):
            return False
        if not all(ints) or any(not t and not _integer(n) for n, _, t in parts):
            raise self.refuse(f"`{ast.unparse(node)}`: labels' numbers with floats (`tf.to_float` of them is a float)")
        return True

    def int_division(self, node: ast.AST, op: ast.operator, left: ast.AST, right: ast.AST) -> Expr:
        """`a // b`, `a % b` (`tf.floordiv`, `tf.floormod`) of labels' numbers: netc's `//` and `%`
        (TF's floor semantics); a number divisor must be a nonzero integer."""
        (a, pa, ta), (b, pb, tb) = self.expr(left), self.expr(right)
        if not ta or not self.int_operands(node, (left, a, ta), (right, b, tb)):
            raise self.refuse(
                f"`{ast.unparse(node)}` (floor division and modulo of labels' numbers, in an `eval` whose "
                "`out_type` is labels, are)"
            )
        if not tb and self.number(right) == 0:
            raise self.refuse(f"`{ast.unparse(node)}`: division by zero")
        sym = cst.FloorDivide() if isinstance(op, ast.FloorDiv) else cst.Modulo()
        out = self.broadcast(cst.BinaryOperation(_paren(a, pa < 2), sym, _paren(b, pb <= 2)), (a, ta), (b, tb))
        self.ints.add(id(out))
        return out

    def whole_of(self, out: Expr, *parts: tuple[ast.AST, Expr]) -> Expr:
        """`out` (`+ - *`, maximum or minimum of `parts`) is a whole number where each part is (a
        float of labels, an integral number): a window's start `tf.to_float(pos) - 2.0` is one."""
        if all(id(e) in self.whole or _integral(n) for n, e in parts) and any(id(e) in self.whole for _, e in parts):
            self.whole.add(id(out))
        return out

    def pow(self, base: ast.AST, exponent: ast.AST) -> tuple[Expr, int, bool]:
        a, pa, ta = self.expr(base)
        b, pb, tb = self.expr(exponent)
        if tb or not ta:
            raise self.refuse(f"`{ast.unparse(base)} ** {ast.unparse(exponent)}` (a tensor to a number's power is)")
        return self.like(cst.BinaryOperation(_paren(a, pa <= _POW), cst.Power(), _paren(b, pb < 9)), a), _POW, True

    def like(self, out: Expr, inner: Expr, is_tensor: bool = True) -> Expr:
        """`out` over the dims of `inner` (an elementwise function of it)."""
        if is_tensor and id(inner) in self.meta:
            dims, sparse = self.meta[id(inner)]
            if sparse is not None:
                raise self.refuse("arithmetic on labels (an `argmax`; `tf.to_float` of it is a number)")
            self.meta[id(out)] = (dims, None)
        if is_tensor and id(inner) in self.ordered:
            self.ordered[id(out)] = self.ordered[id(inner)]
        return out

    def broadcast(self, out: Expr, *parts: tuple[Expr, bool]) -> Expr:
        """`out` over the union of its operands' dims (netc broadcasts by name, as RETURNN's `eval` by axes)."""
        if any(t and id(e) in self.meta for e, t in parts):
            dims: list[str] = []
            for e, t in parts:
                d, sparse = self.dims(e, t)
                if sparse is not None:
                    raise self.refuse("arithmetic on labels (an `argmax`; `tf.to_float` of it is a number)")
                dims += [x for x in d if x not in dims]
            self.meta[id(out)] = (tuple(dims), None)
        # RETURNN's layout of operands of one known layout (and numbers) is the result's
        orders = {self.ordered.get(id(e)) for e, t in parts if t}
        if len(orders) == 1 and None not in orders:
            self.ordered[id(out)] = orders.pop()
        return out

    def call(self, node: ast.Call) -> tuple[Expr, int, bool]:
        fn = ast.unparse(node.func)
        if fn == "source":
            return self.source(node), 9, True
        if fn == "safe_log" and len(node.args) == 1 and not node.keywords:
            return self.safe_log(node.args[0]), 9, True
        if fn == "float" and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant):
            v = node.args[0].value
            x = float(v) if isinstance(v, str | int | float) and not isinstance(v, bool) else None
            if x is not None and math.isinf(x):
                return self.infinite(1 if x > 0 else -1, ()), 9, False
            if x is not None and math.isfinite(x):
                return num(x), 9 if x >= 0 else 3, False
        if fn.startswith("tf_compat.v1."):  # RETURNN's `returnn.tf.compat` (in an eval's namespace): tf.compat.v1
            fn = "tf.compat.v1." + fn.removeprefix("tf_compat.v1.")
        if not fn.startswith("tf."):
            raise self.refuse(f"`{ast.unparse(node)}`")
        fn = "tf." + fn[3:].removeprefix("compat.v1.")  # TF 1's names (`tf.to_float`) as TF 2 keeps them
        if fn[3:] in AXIS_FUNCTIONS:
            return self.axis_function(fn[3:], node), 9, True
        if fn[3:] in ("math.l2_normalize", "nn.l2_normalize", "linalg.l2_normalize"):
            return self.l2_normalize(node), 2, True
        fn, args = fn[3:], node.args
        if fn in ("range", "math.range"):
            return self.range_along(node), 9, True
        if fn == "expand_dims" and len(args) + len(node.keywords) == 2:
            # a size-1 axis only TF's broadcasting needs (netc's is by name): the value as it is
            inner = self.tensor(args[0])
            out = inner.deep_clone()
            self.keep.append(inner)
            self.meta[id(out)] = self.dims(inner)
            if id(inner) in self.bools:
                self.bools.add(id(out))
            self.expanded.add(id(out))
            return out, 9, True
        zeros_dtype = None
        if fn in ("zeros_like", "ones_like") and [k.arg for k in node.keywords] == ["dtype"] and len(args) == 1:
            zeros_dtype = _dtype(node.keywords[0].value)  # `tf.zeros_like(x, dtype=tf.int32)`
            if zeros_dtype not in ("float32", "int32", "int64"):
                raise self.refuse(f"`{ast.unparse(node)}` (dtype float32 or int32 is)")
        elif fn in ("cast", "dtypes.cast") and [k.arg for k in node.keywords] == ["dtype"] and len(args) == 1:
            args = [*args, node.keywords[0].value]  # `tf.cast(x, dtype=...)`
        elif fn in ("clip_by_value", "math.clip_by_value") and _clip_keywords(node) is not None:
            args = _clip_keywords(node)  # `tf.clip_by_value(x, clip_value_min=lo, clip_value_max=hi)`
        elif node.keywords:
            raise self.refuse(f"`{ast.unparse(node)}`")
        if fn in ("cast", "dtypes.cast") and len(args) == 2 and _dtype(args[1]) in ("float32", "bool"):
            out = self.bool_cast(args[0], _dtype(args[1]))
            if out is not None:
                return out, 0 if id(out) in self.bools else 9, True
        if fn.removeprefix("math.") in COMPARISONS and len(args) == 2:
            (a, _, ta), (b, _, tb) = self.expr(args[0]), self.expr(args[1])
            if not (ta or tb):
                raise self.refuse(f"`{ast.unparse(node)}` of two numbers")
            out = self.broadcast(compare(COMPARISONS[fn.removeprefix("math.")], a, b), (a, ta), (b, tb))
            self.bools.add(id(out))
            return out, 0, True
        if fn in ("where", "compat.v2.where") and len(args) == 3:
            return self.where(node, args), 9, True
        if fn in CASTS and len(args) == CASTS[fn] and (len(args) == 1 or _dtype(args[1]) == "float32"):
            return self.to_float(args[0]), 9, True
        if fn in ("zeros_like", "ones_like") and len(args) == 1:  # a constant over x's dims
            x = self.tensor(args[0])
            dims, sparse = self.dims(x)
            if sparse is not None:
                raise self.refuse(f"`{ast.unparse(node)}` of labels")
            what = fn.removesuffix("_like")
            over = [name("batch") if d == BATCH else self.imp.dim(d) for d in dims]
            if zeros_dtype in ("int32", "int64"):  # netc's ints are int32
                self.imp.imports.add("full")
                value = num(0 if what == "zeros" else 1)
                out = call("full", *over, value=value, dtype=cst.SimpleString('"int32"'))
            else:
                self.imp.imports.add(what)
                out = call(what, *over)
            out = self.mark(out, dims)
            if what == "zeros":
                self.zeros[id(out)] = dims
                self.keep.append(out)
            if id(x) in self.ordered:
                self.ordered[id(out)] = self.ordered[id(x)]
            return out, 9, True
        if fn in LOGICAL and len(args) == LOGICAL[fn][1]:
            return self.logical(LOGICAL[fn][0], args), 0, True
        form = _ACTIVATION_FORMS.get(fn.removeprefix("nn.").removeprefix("math."))
        if form is not None and fn not in UNARY and len(args) == 1:  # `tf.log_sigmoid`: as the activation
            arg = self.tensor(args[0])
            self.imp.imports.update(form[1])
            return self.like(form[0](_paren(arg, not isinstance(arg, cst.Name | cst.Call))), arg), 0, True
        if fn in UNARY and len(args) == 1:
            arg = self.tensor(args[0])
            self.imp.imports.add(UNARY[fn])
            return self.like(call(UNARY[fn], arg), arg), 9, True
        if fn in BINARY and len(args) == 2:
            (a, _, ta), (b, _, tb) = self.expr(args[0]), self.expr(args[1])
            if not (ta or tb):
                raise self.refuse(f"`{ast.unparse(node)}` of two numbers")
            self.imp.imports.add(BINARY[fn])
            out = self.broadcast(call(BINARY[fn], a, b), (a, ta), (b, tb))
            return self.whole_of(out, (args[0], a), (args[1], b)), 9, True
        if fn in ("clip_by_value", "math.clip_by_value") and len(args) == 3:
            if not all(isinstance(a, ast.Constant) or isinstance(a, ast.UnaryOp) for a in args[1:]):
                # bounds that are tensors (a position kept within [start, length - 1]): TF's
                # minimum(maximum(x, lo), hi)
                inner = ast.Call(ast.Attribute(ast.Name("tf"), "maximum"), [args[0], args[1]], [])
                return self.expr(ast.Call(ast.Attribute(ast.Name("tf"), "minimum"), [inner, args[2]], []))
            x = self.tensor(args[0])
            lo, hi = (self.number(a) for a in args[1:])
            self.imp.imports.add("clip")
            return self.like(call("clip", x, num(lo), num(hi)), x), 9, True
        if fn in ("square", "math.square") and len(args) == 1:
            return self.pow(args[0], ast.Constant(2))
        if fn in ("pow", "math.pow") and len(args) == 2:
            return self.pow(args[0], args[1])
        if fn in SOFTMAX and len(args) == 1:
            src = self.tensor_val(args[0])
            self.imp.imports.add(SOFTMAX[fn])
            axis = self.imp.dim(feature(src, self.imp.dims))
            return call(SOFTMAX[fn], self.tensor(args[0]), axis=axis), 9, True
        if fn in _INTEGER and len(args) == 2:  # a factored label's parts (`tf.floordiv(source(0), 3)`)
            if "truncate" in fn:
                raise self.refuse(f"`{ast.unparse(node)}`: truncating division (`tf.floordiv`, `tf.floormod` are)")
            op = ast.FloorDiv() if "div" in fn else ast.Mod()
            return self.int_division(node, op, args[0], args[1]), 9, True
        raise self.refuse(f"`tf.{fn}` with {len(args)} argument{'s' if len(args) != 1 else ''}")

    def bool_cast(self, arg: ast.AST, dtype: str) -> Expr | None:
        """`tf.cast(b, tf.float32)` of a bool (a comparison): its 0/1 as floats; `tf.cast(x,
        tf.bool)` of a float: `x != 0`; None: not a bool cast (a float's own cast)."""
        if dtype == "float32":
            if not (
                isinstance(arg, ast.Call)
                and ast.unparse(arg.func).removeprefix("tf.").removeprefix("math.") in COMPARISONS
            ):
                return None
            x = self.tensor(arg)
            self.imp.imports.add("cast")
            return self.like(call("cast", x, cst.SimpleString('"float32"')), x)
        x, prec, _ = self.expr(arg)
        if id(x) in self.bools:
            return x
        self.dims(x)
        if self.dims(x)[1] is not None:
            raise self.refuse(f"`tf.cast({ast.unparse(arg)}, tf.bool)` of labels")
        out = self.like(compare("!=", _paren(x, prec < 1), num(0.0)), x)
        self.bools.add(id(out))
        return out

    def where(self, node: ast.Call, args: list[ast.AST]) -> Expr:
        """`tf.where(cond, a, b)` (TF 2's, elementwise; TF 1's of one argument is not this): netc's `where`."""
        c, _, tc = self.expr(args[0])
        if id(c) not in self.bools:
            raise self.refuse(f"`{ast.unparse(node)}` (a condition that is a comparison or a cast to bool is)")
        (a, _, ta), (b, _, tb) = self.expr(args[1]), self.expr(args[2])
        if id(a) in self.pos_inf or id(b) in self.pos_inf:
            raise self.refuse(f"`{ast.unparse(node)}` with a branch of +inf (−inf is)")
        for inf, other, cond in ((a, b, c), (b, a, None)):
            if id(inf) not in self.neg_inf:
                continue
            if id(other) in self.neg_inf or not (tb if other is b else ta):
                raise self.refuse(f"`{ast.unparse(node)}` (−inf and a tensor as its branches are)")
            if cond is None:  # −inf where the condition does not hold
                cond = self.negated(c, args[0])
            self.imp.imports.add("mask_inf")
            out = self.broadcast(call("mask_inf", other, cond), (other, True), (cond, True))
            dims = self.dims(out)[0]
            if any(d not in dims for d in self.neg_inf[id(inf)]):
                raise self.refuse(f"`{ast.unparse(node)}`: a −inf branch of more dims than the others")
            return out
        self.imp.imports.add("where")
        return self.broadcast(call("where", c, a, b), (c, tc), (a, ta), (b, tb))

    def negated(self, c: Expr, node: ast.AST) -> Expr:
        """The bool `c` negated: a comparison's operator flipped (`a >= b` -> `a < b`: no NaN in
        scores), else its 0/1 compared with 0."""
        flip = {cst.GreaterThanEqual: cst.LessThan, cst.GreaterThan: cst.LessThanEqual}
        flip |= {cst.LessThan: cst.GreaterThanEqual, cst.LessThanEqual: cst.GreaterThan}
        flip |= {cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal}
        if isinstance(c, cst.Comparison) and len(c.comparisons) == 1 and type(c.comparisons[0].operator) in flip:
            target = c.comparisons[0].with_changes(operator=flip[type(c.comparisons[0].operator)]())
            out = c.with_changes(comparisons=[target], lpar=[], rpar=[])
        else:
            self.imp.imports.add("cast")
            out = compare("==", call("cast", c, cst.SimpleString('"float32"')), num(0.0))
        self.like(out, c)
        self.bools.add(id(out))
        return out

    def range_along(self, node: ast.Call) -> Expr:
        """`tf.range(tf.shape(x)[-1], dtype=...)`: the positions along x's feature axis (last in
        RETURNN's layout, as `axis=-1` reads it): `range_over(f, dtype=...)` (int32 or float32)."""
        kw = {k.arg: k.value for k in node.keywords}
        args = list(node.args)
        if len(args) == 2 and "dtype" not in kw:
            kw["dtype"] = args.pop()
        dtype = _dtype(kw["dtype"]) if "dtype" in kw else "int32"
        size = args[0] if len(args) == 1 else None
        shape = size.value if isinstance(size, ast.Subscript) else None
        if (
            set(kw) - {"dtype"}
            or dtype not in ("int32", "int64", "float32")
            or not (isinstance(shape, ast.Call) and ast.unparse(shape.func) in ("tf.shape", "tf.compat.v1.shape"))
            or len(shape.args) != 1
            or shape.keywords
        ):
            raise self.refuse(f"`{ast.unparse(node)}` (`tf.range(tf.shape(x)[-1])`, x's feature axis, is)")
        x = self.tensor(shape.args[0])
        dims, sparse = self.dims(x)
        k = self.number(size.slice)
        if sparse is not None or id(x) in self.expanded or k not in (-1, len(dims) - 1):
            raise self.refuse(f"`{ast.unparse(node)}` (`tf.range(tf.shape(x)[-1])`, x's feature axis, is)")
        feat = self.axis_of(shape.args[0], x, "range")
        self.imp.imports.add("range_over")
        dt = cst.SimpleString('"float32"' if dtype == "float32" else '"int32"')
        return self.mark(call("range_over", self.imp.dim(feat), dtype=dt), (feat,))

    def logical(self, kind: str, args: list[ast.AST]) -> Expr:
        """`tf.logical_and/or/not` of bools: netc has no logical operators, so their 0/1 values as
        floats, compared (`cast(a, "float32") * cast(b, "float32") > 0.0`; `+` for or; `== 0.0` for
        not)."""
        parts = []
        for arg in args:
            x = self.tensor(arg)
            self.dims(x)  # not labels
            parts.append(self.like(call("cast", x, cst.SimpleString('"float32"')), x))
        self.imp.imports.add("cast")
        if kind == "not":
            return self.like(compare("==", parts[0], num(0.0)), parts[0])
        op = cst.Multiply() if kind == "and" else cst.Add()
        both = self.broadcast(cst.BinaryOperation(parts[0], op, parts[1]), (parts[0], True), (parts[1], True))
        return self.like(compare(">", both, num(0.0)), both)

    def to_float(self, arg: ast.AST) -> Expr:
        """`tf.to_float(x)`, `tf.cast(x, tf.float32)`: of labels (an `argmax`, a label source) their
        numbers; of a float, itself."""
        self.casting = True
        try:
            x = self.tensor(arg)
        finally:
            self.casting = False
        dims, sparse = self.dims(x)
        if sparse is None and not (isinstance(arg, ast.Call) and ast.unparse(arg.func) == "source"):
            return x
        if sparse is None:
            src = self.srcs[self.source_index(arg)]
            if src.sparse is None:
                return x
        self.imp.imports.add("cast")
        out = self.mark(call("cast", x, cst.SimpleString('"float32"')), dims)
        self.whole.add(id(out))
        return out

    def axis_of(self, arg: ast.AST, x: Expr, fn: str) -> str:
        """The dim `axis=-1` names: the feature dim of the sources `arg` reads, where RETURNN's layout
        of each has it last."""
        calls = [n for n in ast.walk(arg) if isinstance(n, ast.Call) and ast.unparse(n.func) == "source"]
        read = {self.source_index(n) for n in calls}
        val = max((self.srcs[i] for i in read), key=lambda v: len(v.dims), default=None)
        feat = feature(val, self.imp.dims) if val is not None else None
        static = [d for d in self.dims(x)[0] if self.imp.dims.is_static(d)]
        if feat is None or read - self.feature_last or not static or static[-1] != feat:
            raise self.refuse(
                f"`tf.{fn}` over axis -1 of a value whose last axis netc does not know (of sources whose "
                "feature axis is last in RETURNN's layout, as a `linear`'s, it is)"
            )
        return feat

    def l2_normalize(self, node: ast.Call) -> Expr:
        """`tf.math.l2_normalize(x, axis=k)` over the feature axis (k −1, or the last of x's axes:
        RETURNN's layout of a source whose feature axis is last): TF's `x / sqrt(max(sum(x²),
        1e-12))`, the sum over that axis."""
        kw = {k.arg: k.value for k in node.keywords}
        args = list(node.args)
        if len(args) == 2 and "axis" not in kw:
            kw["axis"] = args.pop()
        if len(args) != 1 or set(kw) - {"axis"} or "axis" not in kw:
            raise self.refuse(f"`{ast.unparse(node)}`")
        x = self.tensor(args[0])
        dims, sparse = self.dims(x)
        n, order = self.number(kw["axis"]), self.ordered.get(id(x))
        if sparse is None and order is not None and n == int(n) and -len(order) <= n < len(order):
            if order[int(n)] == BATCH:
                raise self.refuse(f"`{ast.unparse(node)}` over the batch axis")
            feat = self.imp.dim(order[int(n)])  # an axis of the source's layout RETURNN's netc knows
        elif sparse is not None or id(x) in self.expanded or n not in (-1, len(dims) - 1):
            raise self.refuse(
                f"`{ast.unparse(node)}` (axis -1, or the last of the value's axes, the feature axis, is; or an axis "
                "of a source whose layout netc knows, as an `expand_dims`'s of a `linear`'s)"
            )
        else:
            feat = self.imp.dim(self.axis_of(args[0], x, "math.l2_normalize"))
        self.imp.imports |= {"sqrt", "maximum", "reduce_sum"}
        x = _paren(x, not isinstance(x, cst.Name | cst.Call))
        norm = call(
            "sqrt",
            call("maximum", call("reduce_sum", cst.BinaryOperation(x, cst.Multiply(), x), axis=feat), num(1e-12)),
        )
        return self.mark(cst.BinaryOperation(x, cst.Divide(), norm), dims)

    def axis_function(self, fn: str, node: ast.Call) -> Expr:
        """`tf.squeeze(x, axis=-1)` of a feature axis of size 1, `tf.argmax(x, axis=-1)` (labels over
        it), `tf.reduce_*`/`tf.math.reduce_*(x, axis=-1, keepdims=...)` over it."""
        kw = {k.arg: k.value for k in node.keywords}
        args = list(node.args)
        if len(args) == 2 and "axis" not in kw:
            kw["axis"] = args.pop()
        labels = {"axis", "output_type"}
        allowed = {"squeeze": {"axis"}, "cumsum": {"axis"}, "argmax": labels, "argmin": labels}
        allowed = allowed.get(AXIS_FUNCTIONS[fn], {"axis", "keepdims"})
        if len(args) != 1 or set(kw) - allowed or None in kw:
            raise self.refuse(f"`{ast.unparse(node)}`")
        if "output_type" in kw and _dtype(kw["output_type"]) not in ("int32", "int64"):
            raise self.refuse(f"`{ast.unparse(node)}` (output_type int32 or int64 is)")
        k = kw.get("axis")
        if k is None:
            raise self.refuse(f"`{ast.unparse(node)}` (an axis number is needed)")
        x = self.tensor(args[0])
        dims, sparse = self.dims(x)
        n, order = self.number(k), self.ordered.get(id(x))
        if order is not None and n == int(n) and -len(order) <= n < len(order):
            axis = order[int(n)]  # RETURNN's layout of a source read `auto_convert=False` (or of what is left of it)
            if axis == BATCH:
                raise self.refuse(f"`{ast.unparse(node)}` over the batch axis")
        elif id(x) in self.expanded:
            raise self.refuse(f"`{ast.unparse(node)}` of a `tf.expand_dims`")
        elif n == len(dims) - 1 and n > 0:  # the last axis of RETURNN's layout: as -1
            axis = self.axis_of(args[0], x, fn)
            if self.in_loop:
                self.loop_axes.append(f"tf.{fn}(..., axis={ast.unparse(k)})")
        elif n != -1:  # RETURNN's layout of the source decides which axis a number is
            raise self.refuse(
                f"`{ast.unparse(node)}` (axis=-1, the feature axis, is; other axis numbers of a "
                "`source(i, auto_convert=False)` whose layout in RETURNN netc knows, as a `softmax_over_spatial`'s "
                "of a batch-major `reinterpret_data`)"
            )
        else:
            axis = self.axis_of(args[0], x, fn)
        rest = tuple(d for d in dims if d != axis)
        what = AXIS_FUNCTIONS[fn]
        if what == "squeeze":
            if not self.imp.dims.is_static(axis) or self.imp.dims.size(axis) != 1:
                raise self.refuse(f"`{ast.unparse(node)}` (a squeeze of an axis of size 1 is)")
            self.imp.imports.add("reduce_sum")
            if sparse is not None and id(x) in self.argmaxed:  # the argmax of its input squeezed: the same labels
                inner, over = self.argmaxed[id(x)]
                x = call("reduce_sum", inner, axis=self.imp.dim(axis))
                out = self.mark(call("argmax", x, axis=self.imp.dim(over)), rest, sparse)
                self.argmaxed[id(out)] = (x, over)
            elif sparse is not None:
                raise self.refuse(f"`{ast.unparse(node)}` of labels")
            else:
                out = self.mark(call("reduce_sum", x, axis=self.imp.dim(axis)), rest)  # the one value it holds
                if id(x) in self.nonneg_padded:
                    self.nonneg_padded.add(id(out))
            if order is not None:
                self.ordered[id(out)] = tuple(d for d in order if d != axis)
            return out
        if sparse is not None:
            raise self.refuse(f"`{ast.unparse(node)}` of labels")
        if what == "cumsum":  # a sequence's padded frames stand after its valid ones: they add nothing
            self.imp.imports.add("cumsum")
            out = self.mark(call("cumsum", x, axis=self.imp.dim(axis)), dims)
            if id(x) in self.nonneg_padded:  # its padded frames 0: their sums repeat the last valid frame's
                self.flat_padded[id(node)] = axis
            if order is not None:
                self.ordered[id(out)] = order
            return out
        flat = what in ("argmax", "argmin") and self._flat_after(args[0], axis)
        if self.imp.dims.is_dynamic(axis) and not (what == "argmax" and id(x) in self.nonneg_padded or flat):
            # TF's reduction counts the padded frames; an argmax over a `softmax_over_spatial`'s weights
            # does not differ (none is below 0, the padded ones are 0: the first valid frame wins a tie),
            # nor an argmin/argmax of values whose padded frames repeat the last valid one's
            raise self.refuse(
                f"`{ast.unparse(node)}` over a time axis (its padded frames count in TF; an argmax over a "
                "`softmax_over_spatial`'s weights is supported, and an argmin/argmax of elementwise functions "
                "of their cumulative sum)"
            )
        if what == "argmin":  # the first smallest: the first largest of the negated values
            x, what = cst.UnaryOperation(cst.Minus(), _paren(x, not isinstance(x, cst.Name | cst.Call))), "argmax"
        self.imp.imports.add(what)
        out = self.mark(call(what, x, axis=self.imp.dim(axis)), rest, axis if what == "argmax" else None)
        if what == "argmax":
            self.argmaxed[id(out)] = (x, axis)
        if "keepdims" in kw:
            keep = kw["keepdims"]
            if not (isinstance(keep, ast.Constant) and isinstance(keep.value, bool)):
                raise self.refuse(f"`{ast.unparse(node)}` (keepdims True or False is)")
            if keep.value:
                self.kept.add(axis)
        if order is not None and axis not in self.kept:
            self.ordered[id(out)] = tuple(d for d in order if d != axis)
        return out

    def _flat_after(self, node: ast.AST, axis: str) -> bool:
        """Whether the padded frames along `axis` of `node`'s value repeat the value of the sequence's
        last valid frame: a number, the cumulative sum of a value whose padded frames are 0
        (`flat_padded`), elementwise functions of those. An argmin/argmax over it is the one over the
        valid frames (the first of equal values wins)."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, int | float)
        if isinstance(node, ast.UnaryOp):
            return self._flat_after(node.operand, axis)
        if isinstance(node, ast.BinOp):
            return self._flat_after(node.left, axis) and self._flat_after(node.right, axis)
        if not isinstance(node, ast.Call):
            return False
        if self.flat_padded.get(id(node)) == axis:
            return True
        fn = ast.unparse(node.func).removeprefix("tf.").removeprefix("compat.v1.").removeprefix("math.")
        if fn in ("ones_like", "zeros_like"):  # a constant
            return True
        elementwise = {*COMPARISONS, *UNARY, *BINARY, *CASTS, "where", "compat.v2.where"}
        return fn in elementwise and all(self._flat_after(a, axis) for a in node.args if not _dtype_arg(a))

    def safe_log(self, arg: ast.AST) -> Expr:
        """RETURNN's `safe_log`: of a softmax, its log-softmax (of the logits); else log(max(x, 1e-20))."""
        if isinstance(arg, ast.Call) and ast.unparse(arg.func) == "source":
            val = self.srcs[self.source_index(arg)]
            if val.logits is not None:
                self.imp.imports.add("log_softmax")
                return call("log_softmax", val.logits.tensor(), axis=self.imp.dim(feature(val, self.imp.dims)))
        x = self.tensor(arg)
        self.imp.imports |= {"log", "maximum"}
        return call("log", call("maximum", x, num(1e-20)))

    def source(self, node: ast.Call) -> Expr:
        val = self.srcs[self.source_index(node)]
        if val.sparse is not None and self.int_labels and not self.casting:  # their numbers
            out = self.mark(val.tensor(), val.dims)
            self.ints.add(id(out))
            return out
        if val.sparse is not None and not self.casting:
            raise Refused(
                self.full,
                "eval",
                "labels (sparse) as a source (`tf.to_float` of them is supported; arithmetic of their numbers "
                "where `out_type` is labels)",
            )
        differs = val.dims != self.full_dims or val.sparse is not None
        out = self.mark(val.tensor(), val.dims, val.sparse) if differs else val.tensor()
        i = self.source_index(node)
        if (not _converts(node) or self.own_layout) and self.layouts.get(i) is not None:
            out = self.mark(out.deep_clone(), val.dims, val.sparse)  # its own node: marks are per node
            self.ordered[id(out)] = self.layouts[i]
        if i in self.weights:
            self.nonneg_padded.add(id(out))
        return out

    def source_index(self, node: ast.Call) -> int:
        kw = {k.arg: k.value for k in node.keywords}
        # auto_convert: the source in the layout of the eval's output (RETURNN's default) or its own:
        # the same values, by name
        ok_kw = all(
            k == "auto_convert" and isinstance(v, ast.Constant) and isinstance(v.value, bool) for k, v in kw.items()
        )
        if len(node.args) != 1 or not ok_kw or not isinstance(node.args[0], ast.Constant):
            raise self.refuse(f"`{ast.unparse(node)}` (`source(i)` with a number i is)")
        i = node.args[0].value
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(self.srcs):
            raise Refused(self.full, "eval", f"eval {self.shown}: `source({i!r})` but it has {len(self.srcs)} sources")
        return i

    def tensor_val(self, node: ast.AST) -> Val:
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "source":
            return self.srcs[self.source_index(node)]
        raise self.refuse(f"`{ast.unparse(node)}` here (`source(i)` is)")

    def tensor(self, node: ast.AST) -> Expr:
        expr, _, is_tensor = self.expr(node)
        if not is_tensor:
            raise self.refuse(f"a number `{ast.unparse(node)}` where a tensor is expected")
        return expr

    def number(self, node: ast.AST) -> float:
        neg = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
        inner = node.operand if neg else node
        if (
            isinstance(inner, ast.Constant)
            and isinstance(inner.value, int | float)
            and not isinstance(inner.value, bool)
        ):
            return -float(inner.value) if neg else float(inner.value)
        raise self.refuse(f"`{ast.unparse(node)}` (a number is expected)")


def _converts(node: ast.Call) -> bool:
    """Whether `source(i, ...)` converts its input to the output's layout (`auto_convert`, its default)."""
    kw = {k.arg: k.value for k in node.keywords}
    return not (isinstance(kw.get("auto_convert"), ast.Constant) and kw["auto_convert"].value is False)


def _dtype(node: ast.AST) -> str | None:
    """`tf.float32`, `"float32"` -> "float32"."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    text = ast.unparse(node)
    return text[3:] if text.startswith("tf.") else None


def _integer(node: ast.AST) -> bool:
    """Whether `node` is an int literal (`3`, `-1`)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool)


def _integral(node: ast.AST) -> bool:
    """Whether `node` is a number with no fraction (`2`, `2.0`, `-1.0`)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    v = node.value if isinstance(node, ast.Constant) else None
    return isinstance(v, int | float) and not isinstance(v, bool) and float(v).is_integer()


def _clip_keywords(node: ast.Call) -> list[ast.AST] | None:
    """`tf.clip_by_value`'s three arguments, given by position or by name; None where others are given."""
    names = ["t", "clip_value_min", "clip_value_max"]
    given = {k.arg: k.value for k in node.keywords}
    if len(node.args) > 3 or set(given) - set(names[len(node.args) :]):
        return None
    args = [*node.args, *(given[n] for n in names[len(node.args) :] if n in given)]
    return args if len(args) == 3 else None


def _dtype_arg(node: ast.AST) -> bool:
    """Whether `node` is a dtype argument (`tf.float32`, `"float32"`)."""
    return isinstance(node, ast.Attribute | ast.Constant) and isinstance(_dtype(node), str)


def _paren(e: Expr, need: bool) -> Expr:
    if not need:
        return e
    return e.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def rejected_conversion(code: object, vals: list[Val], out_type: object) -> str | None:
    """Why RETURNN rejects an `eval` whose `source(i)` (`auto_convert`, its default) converts an
    input of more axes than `out_type` declares to the output's layout (`copy_compatible_to`
    raises: a source's axes are never dropped), else None."""
    if (
        not isinstance(code, str)
        or not isinstance(out_type, dict)
        or not isinstance(out_type.get("shape"), list | tuple)
    ):
        return None
    axes = len(out_type["shape"]) + (0 if "batch_dim_axis" in out_type and out_type["batch_dim_axis"] is None else 1)
    try:
        tree = ast.parse(code.strip(), mode="eval")
    except SyntaxError:
        return None
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Call) and ast.unparse(n.func) == "source" and n.args):
            continue
        i, kw = n.args[0], {k.arg: k.value for k in n.keywords}
        converts = len(n.args) < 2 and not (
            isinstance(kw.get("auto_convert"), ast.Constant) and not kw["auto_convert"].value
        )
        if isinstance(i, ast.Constant) and isinstance(i.value, int) and 0 <= i.value < len(vals) and converts:
            if len(vals[i.value].dims) > axes:
                return (
                    f"RETURNN rejects it: `{ast.unparse(n)}` converts its input of {len(vals[i.value].dims)} axes to the "
                    f"layout of `out_type`, of {axes} (`source({i.value}, auto_convert=False)` reads it as it is)"
                )
    return None
