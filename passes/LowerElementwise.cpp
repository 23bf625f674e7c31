//===- LowerElementwise.cpp - elementwise ops and reductions onto engines ---===//
//
// One op of a kernel for one [p x f] tile of the iteration space (see
// LowerToIsa.cpp): elementwise ops on the vector and scalar engines, row
// reductions (chunked when a row is too long for SBUF), and the dispatch of
// matmuls to LowerMatmul.cpp.
//
//===----------------------------------------------------------------------===//

#include "passes/KernelLowering.h"
#include "passes/ScalarEval.h"
#include "dialects/aten/TypeRules.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

namespace neuroncc::lowering {

LogicalResult KernelLowering::lowerOp(Operation* op, int64_t p, int64_t f) {
  const int64_t fullWidth = f;
  // An elementwise op on immediates only is an immediate (constant folding
  // normally got there first).
  if (aten::isElementwise(op) && llvm::all_of(op->getOperands(), [&](Value v) {
        auto it = layouts.find(v);
        return it != layouts.end() && it->second.kind == Kind::Imm;
      }))
    if (auto fn = scalarFunction(op)) {
      SmallVector<double> args;
      for (Value v : op->getOperands()) args.push_back(layouts[v].imm);
      layouts[op->getResult(0)].kind = Kind::Imm;
      layouts[op->getResult(0)].imm = (*fn)(args);
      return success();
    }
  Value result = op->getResult(0);
  auto resultElem = nc::deviceElementType(llvm::cast<RankedTensorType>(result.getType()).getElementType());
  // Every value is rounded to its op's dtype, as the eager op rounds it, so a
  // fused chain computes what the unfused one does (and bf16 tiles take the
  // engines' 2-byte fast paths).
  Type elem = resultElem;
  // A value of f32 whose only use is a returned cast is computed straight
  // into the cast's dtype (one rounding, and the cast becomes free). Not a
  // value of a narrower dtype: eager rounds it to that dtype first (an f16
  // matmul's sums cast to f32 for a layer norm are f16 values; computed
  // straight into f32 they kept digits the norm of a nearly constant row
  // amplified: graph_fuzz 95959595 case 476).
  if (result.hasOneUse())
    if (auto cast = llvm::dyn_cast<aten::ToCopyOp>(*result.getUsers().begin());
        cast && yielded.contains(cast.getResult()) && aten::isFloatType(cast.getType().getElementType()) &&
        aten::isFloatType(llvm::cast<RankedTensorType>(result.getType()).getElementType()) && resultElem.isF32())
      elem = nc::deviceElementType(cast.getType().getElementType());
  // By value: a reference into `layouts` dangles once a result's layout is
  // inserted (the map may grow), and the kinds read after that would be
  // whatever the freed memory held.
  auto layoutOf = [&](Value v) -> Layout { return layouts.lookup(v); };

  auto tensorScalar = [&](Value out, Value in, Value scalar, StringRef alu, double imm, bool reverse) {
    this->tensorScalar(out, in, scalar, alu, imm, op, reverse);
  };
  // func(in), without a scale or a bias (the bias -0.0 adds nothing).
  auto activation = [&](Value out, Value in, StringRef func) {
    setSource(b->create<nc::ActivationOp>(loc, out, in, func), op);
  };

  // Binary: combine two operands of any kind with `alu`.
  auto binary = [&](Value lhs, Value rhs, StringRef alu, double alpha) -> LogicalResult {
    const Layout ll = layoutOf(lhs), rl = layoutOf(rhs);
    if (ll.kind == Kind::Imm && rl.kind == Kind::Imm)
      return op->emitError("operations on two compile-time constants are not supported yet");
    Kind outKind = (ll.kind == Kind::Full || rl.kind == Kind::Full) ? Kind::Full : Kind::Row;
    layouts[result].kind = outKind;
    int64_t width = outKind == Kind::Full ? f : 1;
    Value out = alloc(p, width, elem);
    Value rhsTile;
    double rhsImm = rl.imm * alpha;
    if (rl.kind != Kind::Imm) {
      rhsTile = tileOf(rhs);
      if (alpha != 1.0) {  // alpha * other, kept in f32
        Value scaled = alloc(p, rl.kind == Kind::Full ? f : 1, b->getF32Type());
        tensorScalar(scaled, rhsTile, Value(), "mul", alpha, false);
        rhsTile = scaled;
      }
    }
    if (ll.kind == Kind::Imm) {
      tensorScalar(out, rhsTile, Value(), alu, ll.imm, /*reverse=*/true);
    } else if (rl.kind == Kind::Imm) {
      tensorScalar(out, tileOf(lhs), Value(), alu, rhsImm, false);
    } else if (ll.kind == rl.kind) {
      auto inst = b->create<nc::TensorTensorOp>(loc, out, tileOf(lhs), rhsTile, b->getStringAttr(alu));
      setSource(inst, op);
    } else if (ll.kind == Kind::Full) {
      tensorScalar(out, tileOf(lhs), rhsTile, alu, 0.0, false);
    } else {
      tensorScalar(out, rhsTile, tileOf(lhs), alu, 0.0, /*reverse=*/true);
    }
    tiles[result] = out;
    return success();
  };

  auto unary = [&](Value in, auto emit) -> LogicalResult {
    const Layout il = layoutOf(in);
    if (il.kind == Kind::Imm)
      return op->emitError("operations on compile-time constants are not supported yet");
    layouts[result].kind = il.kind;
    Value out = alloc(p, il.kind == Kind::Full ? f : 1, elem);
    emit(out, tileOf(in));
    tiles[result] = out;
    return success();
  };

  // A Full [p x f] tile holding `v` (laid out as `l`): broadcasts a per-row
  // value or an immediate across the row (iota writes the constant, an add
  // the row value).
  auto fullTile = [&](Value v, const Layout& l) -> Value {
    if (l.kind == Kind::Full) return tileOf(v);
    return broadcastRow(l.kind == Kind::Row ? tileOf(v) : Value(), l.kind == Kind::Imm ? l.imm : 0.0, p, f,
                        b->getF32Type(), op);
  };

  // cond ? a : b with the kinds lined up. Layouts are passed in because an
  // operand may be an immediate that has no value of its own.
  auto select = [&](Value cond, Layout lc, Value onTrue, Layout lt, Value onFalse,
                    Layout lf) -> LogicalResult {
    bool anyFull = lc.kind == Kind::Full || lt.kind == Kind::Full || lf.kind == Kind::Full;
    if (lc.kind == Kind::Imm && lt.kind == Kind::Imm && lf.kind == Kind::Imm)
      return op->emitError("operations on compile-time constants are not supported yet");
    int64_t width = anyFull ? f : 1;
    auto operand = [&](Value v, const Layout& l) -> Value {
      if (anyFull) return fullTile(v, l);
      if (l.kind == Kind::Row) return tileOf(v);
      Value t = alloc(p, 1, b->getF32Type());  // an immediate as a per-row value
      fillConstant(t, l.imm, op);
      return t;
    };
    Value c = operand(cond, lc), t = operand(onTrue, lt), e = operand(onFalse, lf);
    layouts[result].kind = anyFull ? Kind::Full : Kind::Row;
    Value out = alloc(p, width, elem);
    setSource(b->create<nc::TensorSelectOp>(loc, out, t, e, c), op);
    tiles[result] = out;
    return success();
  };

  auto matmul = [&](Value lhs, Value rhs, Value bias, double beta, double alpha) {
    return lowerMatmul(op, lhs, rhs, bias, beta, alpha, p, fullWidth, elem);
  };

  auto activationOf = [&](Value in, StringRef func) {
    return unary(in, [&](Value out, Value t) { activation(out, t, func); });
  };
  auto scalarOp = [&](Value in, StringRef alu, double imm, bool reverse) {
    return unary(in, [&](Value out, Value t) { tensorScalar(out, t, Value(), alu, imm, reverse); });
  };

  auto reduce = [&](Value in, StringRef alu, bool mean) -> LogicalResult {
    const Layout il = layoutOf(in);
    int64_t count = reducedCount(op);
    if (il.kind == Kind::Imm) {  // a splat reduces to a splat
      layouts[result].kind = Kind::Imm;
      layouts[result].imm = alu == "add" && !mean ? il.imm * double(count) : il.imm;
      return success();
    }
    layouts[result].kind = Kind::Row;
    if (il.kind == Kind::Row) {
      // Constant along the row: one value stands for `count` equal ones, so
      // no chunk-by-chunk accumulation is needed even in a chunked kernel.
      Value out = alloc(p, 1, elem);
      double factor = alu == "add" && !mean ? double(count) : 1.0;
      tensorScalar(out, tileOf(in), Value(), factor == 1.0 ? "bypass" : "mul", factor, false);
      tiles[result] = out;
      return success();
    }
    if (count != space.cols * space.split)
      return op->emitError("internal: a reduction over ") << count << " elements in a kernel whose rows have "
                                                           << space.cols * space.split;
    if (chunked && accumulating) {
      Value part = alloc(p, 1, b->getF32Type());
      setSource(b->create<nc::TensorReduceOp>(loc, part, tileOf(in), b->getStringAttr(alu)), op);
      auto it = accumulators.find(result);
      if (it == accumulators.end())
        accumulators[result] = part;
      else
        setSource(b->create<nc::TensorTensorOp>(loc, it->second, it->second, part, b->getStringAttr(alu)), op);
      return success();
    }
    double scale = mean ? 1.0 / double(count) : 1.0;
    if (space.split > 1) {
      Value part = alloc(p, 1, b->getF32Type());
      setSource(b->create<nc::TensorReduceOp>(loc, part, tileOf(in), b->getStringAttr(alu)), op);
      Value total = combineSpreadPartials(part, alu, p, op);
      if (scale != 1.0 || !elem.isF32()) {
        Value out = alloc(p, 1, elem);
        tensorScalar(out, total, Value(), "mul", scale, false);
        total = out;
      }
      tiles[result] = total;
      return success();
    }
    Value out = alloc(p, 1, elem);
    if (scale != 1.0) {
      Value acc = alloc(p, 1, b->getF32Type());
      auto inst = b->create<nc::TensorReduceOp>(loc, acc, tileOf(in), b->getStringAttr(alu));
      setSource(inst, op);
      tensorScalar(out, acc, Value(), "mul", scale, false);
    } else {
      auto inst = b->create<nc::TensorReduceOp>(loc, out, tileOf(in), b->getStringAttr(alu));
      setSource(inst, op);
    }
    tiles[result] = out;
    return success();
  };

  return llvm::TypeSwitch<Operation*, LogicalResult>(op)
      .Case([&](aten::MulTensorOp o) { return binary(o.getSelf(), o.getOther(), "mul", 1.0); })
      .Case([&](aten::MaximumOp o) { return binary(o.getSelf(), o.getOther(), "max", 1.0); })
      .Case([&](aten::PowTensorTensorOp o) { return binary(o.getSelf(), o.getOther(), "pow", 1.0); })
      .Case([&](aten::MinimumOp o) { return binary(o.getSelf(), o.getOther(), "min", 1.0); })
      .Case([&](aten::DivTensorOp o) { return binary(o.getSelf(), o.getOther(), "div", 1.0); })
      .Case([&](aten::AddTensorOp o) {
        return binary(o.getSelf(), o.getOther(), "add", o.getAlpha().convertToDouble());
      })
      .Case([&](aten::SubTensorOp o) {
        return binary(o.getSelf(), o.getOther(), "sub", o.getAlpha().convertToDouble());
      })
      .Case([&](aten::MulScalarOp o) {
        double v = o.getOther().convertToDouble();
        return unary(o.getSelf(), [&](Value out, Value in) { tensorScalar(out, in, Value(), "mul", v, false); });
      })
      .Case([&](aten::AddScalarOp o) {
        double v = o.getOther().convertToDouble() * o.getAlpha().convertToDouble();
        return unary(o.getSelf(), [&](Value out, Value in) { tensorScalar(out, in, Value(), "add", v, false); });
      })
      .Case([&](aten::NegOp o) {
        return activationOf(o.getSelf(), "negate");
      })
      .Case([&](aten::ExpOp o) {
        return activationOf(o.getSelf(), "exp");
      })
      .Case([&](aten::RsqrtOp o) {
        return activationOf(o.getSelf(), "rsqrt");
      })
      .Case([&](aten::SqrtOp o) {
        return activationOf(o.getSelf(), "sqrt");
      })
      .Case([&](aten::SubScalarOp o) {
        return scalarOp(o.getSelf(), "sub", o.getOther().convertToDouble() * o.getAlpha().convertToDouble(), false);
      })
      .Case([&](aten::DivScalarOp o) { return scalarOp(o.getSelf(), "div", o.getOther().convertToDouble(), false); })
      .Case([&](aten::RsubScalarOp o) -> LogicalResult {
        double other = o.getOther().convertToDouble(), alpha = o.getAlpha().convertToDouble();
        if (alpha == 1.0) return scalarOp(o.getSelf(), "sub", other, /*reverse=*/true);
        // other - alpha * self == (self * -alpha) + other
        return unary(o.getSelf(), [&](Value out, Value t) {
          Value scaled = alloc(p, llvm::cast<MemRefType>(t.getType()).getDimSize(1), b->getF32Type());
          tensorScalar(scaled, t, Value(), "mul", -alpha, false);
          tensorScalar(out, scaled, Value(), "add", other, false);
        });
      })
      .Case([&](aten::PowTensorScalarOp o) -> LogicalResult {
        double e = o.getOther().convertToDouble();
        if (e == 2.0) return activationOf(o.getSelf(), "square");
        if (e == 0.5) return activationOf(o.getSelf(), "sqrt");
        if (e == -0.5) return activationOf(o.getSelf(), "rsqrt");
        if (e == 1.0) return activationOf(o.getSelf(), "identity");
        return scalarOp(o.getSelf(), "pow", e, false);
      })
      .Case([&](aten::LogOp o) { return activationOf(o.getSelf(), "log"); })
      .Case([&](aten::ToCopyOp o) -> LogicalResult {
        // Rounds to the target dtype even inside a kernel, as eager does. A
        // tile that already holds the target dtype, or a widening to an f32
        // intermediate (exact), is reused as it is.
        elem = resultElem;
        const Layout il = layoutOf(o.getSelf());
        Type to = o.getType().getElementType();
        Type from = llvm::cast<RankedTensorType>(o.getSelf().getType()).getElementType();
        if (to.isInteger(1) && !from.isInteger(1))  // != 0, as PyTorch's bool cast
          return scalarOp(o.getSelf(), "not_equal", 0.0, false);
        // A whole number needs no rounding: the cast keeps the value (the
        // cast back of PyTorch's promotion, int -> f32 -> op -> int). Any
        // other float is rounded toward zero, as .long() does, so that the
        // integer's users in the kernel see the integer (its store to an
        // integer tensor clamps to the integer's range, NaN giving 0).
        static const llvm::DenseSet<Value> noResults;
        if (llvm::isa<IntegerType>(to) && aten::isFloatType(from) &&
            !isWholeValued(o.getSelf(), wholeResults ? *wholeResults : noResults, wholeMemo))
          return activationOf(o.getSelf(), "trunc");
        if (il.kind != Kind::Imm) {
          Value in = tileOf(o.getSelf());
          Type inElem = llvm::cast<MemRefType>(in.getType()).getElementType();
          bool widening = !yielded.contains(result) && resultElem.isF32() && (inElem.isBF16() || inElem.isF16()) &&
                          aten::isFloatType(llvm::cast<RankedTensorType>(o.getSelf().getType()).getElementType());
          if (inElem == resultElem || widening) {
            layouts[result] = il;
            tiles[result] = in;
            return success();
          }
        }
        return activationOf(o.getSelf(), "identity");
      })
      .Case([&](aten::TanhOp o) { return activationOf(o.getSelf(), "tanh"); })
      .Case([&](aten::SinOp o) { return activationOf(o.getSelf(), "sin"); })
      .Case([&](aten::CosOp o) { return activationOf(o.getSelf(), "cos"); })
      .Case([&](aten::AtanOp o) { return activationOf(o.getSelf(), "atan"); })
      .Case([&](aten::ErfOp o) { return activationOf(o.getSelf(), "erf"); })
      .Case([&](aten::Expm1Op o) { return activationOf(o.getSelf(), "expm1"); })
      .Case([&](aten::Log1pOp o) { return activationOf(o.getSelf(), "log1p"); })
      .Case([&](aten::FloorOp o) { return activationOf(o.getSelf(), "floor"); })
      .Case([&](aten::CeilOp o) { return activationOf(o.getSelf(), "ceil"); })
      .Case([&](aten::TruncOp o) { return activationOf(o.getSelf(), "trunc"); })
      .Case([&](aten::RoundOp o) { return activationOf(o.getSelf(), "round"); })
      .Case([&](aten::SigmoidOp o) { return activationOf(o.getSelf(), "sigmoid"); })
      .Case([&](aten::ReluOp o) { return activationOf(o.getSelf(), "relu"); })
      .Case([&](aten::SiluOp o) { return activationOf(o.getSelf(), "silu"); })
      .Case([&](aten::AbsOp o) { return activationOf(o.getSelf(), "abs"); })
      .Case([&](aten::GeluOp o) {
        return activationOf(o.getSelf(), o.getApproximate() == "tanh" ? "gelu_tanh" : "gelu");
      })
      .Case([&](aten::EqTensorOp o) { return binary(o.getSelf(), o.getOther(), "is_equal", 1.0); })
      .Case([&](aten::NeTensorOp o) { return binary(o.getSelf(), o.getOther(), "not_equal", 1.0); })
      .Case([&](aten::LtTensorOp o) { return binary(o.getSelf(), o.getOther(), "is_lt", 1.0); })
      .Case([&](aten::LeTensorOp o) { return binary(o.getSelf(), o.getOther(), "is_le", 1.0); })
      .Case([&](aten::GtTensorOp o) { return binary(o.getSelf(), o.getOther(), "is_gt", 1.0); })
      .Case([&](aten::GeTensorOp o) { return binary(o.getSelf(), o.getOther(), "is_ge", 1.0); })
      .Case([&](aten::EqScalarOp o) { return scalarOp(o.getSelf(), "is_equal", o.getOther().convertToDouble(), false); })
      .Case([&](aten::NeScalarOp o) { return scalarOp(o.getSelf(), "not_equal", o.getOther().convertToDouble(), false); })
      .Case([&](aten::LtScalarOp o) { return scalarOp(o.getSelf(), "is_lt", o.getOther().convertToDouble(), false); })
      .Case([&](aten::LeScalarOp o) { return scalarOp(o.getSelf(), "is_le", o.getOther().convertToDouble(), false); })
      .Case([&](aten::GtScalarOp o) { return scalarOp(o.getSelf(), "is_gt", o.getOther().convertToDouble(), false); })
      .Case([&](aten::GeScalarOp o) { return scalarOp(o.getSelf(), "is_ge", o.getOther().convertToDouble(), false); })
      .Case([&](aten::WhereSelfOp o) {
        Layout lc = layoutOf(o.getCondition()), lt = layoutOf(o.getSelf()), lf = layoutOf(o.getOther());
        return select(o.getCondition(), lc, o.getSelf(), lt, o.getOther(), lf);
      })
      .Case([&](aten::MaskedFillScalarOp o) {
        Layout fill;
        fill.kind = Kind::Imm;
        fill.imm = o.getValue().convertToDouble();
        Layout lm = layoutOf(o.getMask()), ls = layoutOf(o.getSelf());
        return select(o.getMask(), lm, Value(), fill, o.getSelf(), ls);
      })
      .Case([&](aten::EmbeddingOp o) -> LogicalResult {
        // One gather per row tile: partition p gets row ids[r0 + p].
        auto tv = viewOf.find(o.getWeight()), iv = viewOf.find(o.getIndices());
        if (tv == viewOf.end() || iv == viewOf.end() || !aten::isContiguous(iv->second))
          return op->emitError("embedding table and indices must be HBM tensors (contiguous indices)");
        const aten::StridedView& T = tv->second;
        // Rows of one element (a table [V, 1]) in a wider kernel are a
        // per-row value broadcast over the columns: one element per row.
        bool perRow = T.shape.back() == 1 && f > 1;
        int64_t width = perRow ? 1 : f;
        layouts[result].kind = perRow ? Kind::Row : Kind::Full;
        Value out = alloc(p, width, elem);
        Value raw = out;
        Type tableElem = llvm::cast<MemRefType>(hbmOf[o.getWeight()].getType()).getElementType();
        if (tableElem != elem) raw = alloc(p, width, tableElem);
        SmallVector<int64_t> ap{T.strides[0], p, T.strides[1], width};
        Operation* g = b->create<nc::DmaGatherOp>(
            loc, hbmOf[o.getWeight()], hbmOf[o.getIndices()], raw, b->getI64IntegerAttr(0),
            b->getI64IntegerAttr(T.offset + (perRow ? 0 : c0 * T.strides[1])), b->getDenseI64ArrayAttr(ap),
            b->getI64IntegerAttr(iv->second.offset + r0), b->getI64IntegerAttr(T.shape[0]));
        setEngineAndSource(g, *b, "dma", -1);
        ++numInst;
        ++numDma;
        if (raw != out) activation(out, raw, "identity");
        tiles[result] = out;
        return success();
      })
      .Case([&](aten::CatOp o) -> LogicalResult {
        // Along the last dim (FormKernels): each operand, an HBM value, is
        // loaded into its column range of one tile.
        // Columns split in two dims ([heads, head_dim], a matmul's
        // epilogue): the cat is along the inner one, and each column tile
        // holds whole inner rows (periods); otherwise the columns are one
        // dim and the tile one period when it holds the whole row.
        const bool splitColumns = space.trail.size() == 2;
        if ((space.trail.size() != 1 && !splitColumns) || space.split > 1)
          return op->emitError("internal: a cat in a kernel whose columns are not one dim");
        const int64_t period = splitColumns ? space.trail[1] : space.cols;
        layouts[result].kind = Kind::Full;
        Value out = alloc(p, f, resultElem);  // DMAs copy bytes: the operands' dtype
        // A slice of the last dim of a value this row tile already holds
        // whole (rotate_half's halves of q): that value and the slice's first
        // column, or null.
        auto heldSlice = [&](Value piece, int64_t width) -> std::pair<Value, int64_t> {
          if (c0 % period != 0 || f % period != 0 || (!splitColumns && f != space.cols)) return {};
          return sliceOfFullRows(piece, width, o.getType().getElementType(), period);
        };
        if (splitColumns) {
          int64_t start = 0;
          for (Value piece : o.getTensors()) {
            int64_t width = llvm::cast<RankedTensorType>(piece.getType()).getShape().back();
            auto [src, from] = heldSlice(piece, width);
            if (!src) return op->emitError("internal: a cat over split columns of a value the tile does not hold");
            Value held = tileOf(src);
            for (int64_t col = 0; col < f; col += period)
              if (width > 0)
                copyTile(tileColumns(*b, loc, out, col + start, width), tileColumns(*b, loc, held, col + from, width),
                         op);
            start += width;
          }
          tiles[result] = out;
          return success();
        }
        int64_t start = 0;
        for (Value piece : o.getTensors()) {
          int64_t width = llvm::cast<RankedTensorType>(piece.getType()).getShape().back();
          int64_t lo = std::max(start, c0), hi = std::min(start + width, c0 + f);
          if (auto [src, from] = heldSlice(piece, width); lo < hi && src) {
            copyTile(tileColumns(*b, loc, out, lo - c0, hi - lo),
                     tileColumns(*b, loc, tileOf(src), from + (lo - start), hi - lo), op);
          } else if (std::optional<double> fill = splatPiece(piece); lo < hi && fill) {
            // A constant piece (padding) is written, not loaded.
            fillConstant(tileColumns(*b, loc, out, lo - c0, hi - lo), *fill, op);
          } else if (Layout held = slicedValueLayout(piece); lo < hi && held.kind != Kind::Full) {
            // A slice of a value the kernel computes as one value per row
            // (a scan of a mask broadcast from one element) or an immediate:
            // that value across the columns.
            Value range = tileColumns(*b, loc, out, lo - c0, hi - lo);
            fillConstant(range, held.kind == Kind::Imm ? held.imm : 0.0, op);
            if (held.kind == Kind::Row)
              tensorScalar(range, range, tileOf(piece.getDefiningOp()->getOperand(0)), "add", 0.0, op);
          } else if (lo < hi) {
            auto view = viewOf.find(piece);
            if (view == viewOf.end()) return op->emitError("internal: a cat operand that is not in HBM");
            // The piece laid out as if it were as wide as the kernel's rows.
            aten::StridedView wide = view->second;
            wide.shape.back() = space.cols;
            Layout l;
            if (failed(layoutOfView(wide, l))) return failure();
            l.kind = Kind::Full;  // a piece constant along the row (stride 0, or one column) reads the same way
            emitDma(/*load=*/true, hbmOf[piece], tileColumns(*b, loc, out, lo - c0, hi - lo), l, r0, p, lo - start,
                    hi - lo);
          }
          start += width;
        }
        tiles[result] = out;
        return success();
      })
      .Case([&](aten::MmOp o) { return matmul(o.getSelf(), o.getMat2(), Value(), 1.0, 1.0); })
      .Case([&](aten::BmmOp o) { return matmul(o.getSelf(), o.getMat2(), Value(), 1.0, 1.0); })
      .Case([&](aten::AddmmOp o) {
        return matmul(o.getMat1(), o.getMat2(), o.getSelf(), o.getBeta().convertToDouble(),
                      o.getAlpha().convertToDouble());
      })
      .Case([&](aten::MeanDimOp o) { return reduce(o.getSelf(), "add", true); })
      .Case([&](aten::SumDimIntListOp o) { return reduce(o.getSelf(), "add", false); })
      .Case([&](aten::AmaxOp o) { return reduce(o.getSelf(), "max", false); })
      .Default([&](Operation* o) {
        return o->emitError("op has no NeuronCore lowering yet: ") << o->getName();
      });
}

// After the last chunk: scale a mean and round into the result's tile.
void KernelLowering::finalizeReduction(Operation* op, int64_t p) {
  Value result = op->getResult(0);
  Value acc = accumulators.lookup(result);
  if (!acc) return;  // reduced without accumulation (a per-row or constant input)
  int64_t count = reducedCount(op);
  bool isMean = llvm::isa<aten::MeanDimOp>(op);
  if (space.split > 1) acc = combineSpreadPartials(acc, llvm::isa<aten::AmaxOp>(op) ? "max" : "add", p, op);
  Type elem = nc::deviceElementType(llvm::cast<RankedTensorType>(result.getType()).getElementType());
  if (!isMean && elem.isF32()) {
    tiles[result] = acc;
    return;
  }
  Value out = alloc(p, 1, elem);
  tensorScalar(out, acc, Value(), "mul", isMean ? 1.0 / double(count) : 1.0, op);
  tiles[result] = out;
}

const OnlineSum* KernelLowering::summedOnline(Operation* op) {
  if (!chunked) return nullptr;
  for (const OnlineSum& m : onlineSums)
    if ((op == m.shifted || op == m.exp || op == m.rowSum) && layouts.lookup(m.input).kind == Kind::Full)
      return &m;
  return nullptr;
}

// One chunk of y: r = the running maximum (its own accumulation, already
// holding this chunk) clamped to the finite floats, exp(y - r) on the scalar
// engine with its row sums accumulated, and the running sum rescaled by
// exp(r_old - r) before adding them.
LogicalResult KernelLowering::lowerOnlineStep(const OnlineSum& m, int64_t p, int64_t f) {
  Type f32 = b->getF32Type();
  Value runningMax = accumulators.lookup(m.rowMax->getResult(0));
  if (!runningMax) return m.rowMax->emitError("internal: a softmax normalizer's row maximum is not accumulated");
  Value ref = alloc(p, 1, f32), negRef = alloc(p, 1, f32);
  tensorScalar(ref, runningMax, Value(), "max", -std::numeric_limits<float>::max(), m.rowMax);
  tensorScalar(ref, ref, Value(), "min", std::numeric_limits<float>::max(), m.rowMax);
  tensorScalar(negRef, ref, Value(), "mul", -1.0, m.shifted);
  Value part = alloc(p, 1, f32);
  expWithBias(alloc(p, f, f32), tileOf(m.input), negRef, part, m.exp);
  Value refKey = m.shifted->getResult(0), sumKey = m.exp->getResult(0);
  if (Value total = accumulators.lookup(sumKey)) {
    Value rescale = alloc(p, 1, f32);
    expWithBias(rescale, accumulators.lookup(refKey), negRef, Value(), m.rowSum);
    tensorScalar(total, total, rescale, "mul", 0.0, m.rowSum);
    setSource(b->create<nc::TensorTensorOp>(loc, total, total, part, b->getStringAttr("add")), m.rowSum);
  } else {
    accumulators[sumKey] = part;
  }
  accumulators[refKey] = ref;
  return success();
}

// After the last chunk, in the ops' order (c is computed by then): a
// spread row's partitions first rescale their sums to the row's reference
// (the largest of theirs) and add them; then sum(exp(y - c)) is the sum
// against r times exp(r - c).
void KernelLowering::finalizeOnlineSum(const OnlineSum& m, int64_t p) {
  Value total = accumulators.lookup(m.exp->getResult(0)), ref = accumulators.lookup(m.shifted->getResult(0));
  Type f32 = b->getF32Type();
  if (space.split > 1) {
    Value rowRef = combineSpreadPartials(ref, "max", p, m.rowSum);
    Value negRowRef = alloc(p, 1, f32), rescale = alloc(p, 1, f32);
    tensorScalar(negRowRef, rowRef, Value(), "mul", -1.0, m.rowSum);
    expWithBias(rescale, ref, negRowRef, Value(), m.rowSum);
    tensorScalar(total, total, rescale, "mul", 0.0, m.rowSum);
    total = combineSpreadPartials(total, "add", p, m.rowSum);
    ref = rowRef;
  }
  Value c = m.shift(), negC = alloc(p, 1, f32), rescale = alloc(p, 1, f32), sum = alloc(p, 1, f32);
  if (layouts.lookup(c).kind == Kind::Imm)
    fillConstant(negC, -layouts.lookup(c).imm, m.shifted);
  else
    tensorScalar(negC, tileOf(c), Value(), "mul", -1.0, m.shifted);
  expWithBias(rescale, ref, negC, Value(), m.rowSum);
  tensorScalar(sum, total, rescale, "mul", 0.0, m.rowSum);
  Value result = m.rowSum->getResult(0);
  layouts[result].kind = Kind::Row;
  tiles[result] = sum;
}

// out = exp(in + bias[p, 0]), its row sums into accum when given.
void KernelLowering::expWithBias(Value out, Value in, Value bias, Value accum, Operation* src) {
  setSource(b->create<nc::ActivationOp>(loc, out, in, "exp", bias, accum), src);
}

// Partition q's partial, broadcast along a [p x p] tile and transposed on
// the TensorEngine, is element q of every partition; a mask keeps the
// partials of the partition's own row (the others become the reduction's
// identity) and a reduce along the free dim combines them. A select rather
// than a multiply by the mask, so that an infinite or NaN partial of one row
// does not reach the others. The mask is built once per kernel: partitions
// j and q hold the same row when floor((j + 0.5) / m) == floor((q + 0.5) / m)
// (the half keeps each quotient clear of whole numbers under rounding).
Value KernelLowering::spreadMask(int64_t p) { return blockDiagonalMask(p, p, space.split, space.split); }

Value KernelLowering::blockDiagonalMask(int64_t p, int64_t f, int64_t rows, int64_t columns) {
  Type f32 = b->getF32Type();
  auto blockOf = [&](double partitionStep, double elementStep, int64_t size) {
    Value t = alloc(p, f, f32);
    setSource(b->create<nc::IotaOp>(loc, t, b->getF64FloatAttr(0.5), b->getF64FloatAttr(partitionStep),
                                    b->getF64FloatAttr(elementStep)),
              nullptr);
    setSource(b->create<nc::ActivationOp>(loc, t, t, Value(), Value(), Value(), b->getStringAttr("floor"),
                                          b->getF64FloatAttr(1.0 / double(size)),
                                          b->getF64FloatAttr(nc::kNoBias)),
              nullptr);
    return t;
  };
  Value own = blockOf(1.0, 0.0, rows), other = blockOf(0.0, 1.0, columns);
  Value mask = alloc(p, f, f32);
  setSource(b->create<nc::TensorTensorOp>(loc, mask, own, other, b->getStringAttr("is_equal")), nullptr);
  return mask;
}

Value KernelLowering::combineSpreadPartials(Value partials, StringRef alu, int64_t p, Operation* src) {
  Type f32 = b->getF32Type();
  if (!sameRowMask) sameRowMask = spreadMask(p);
  Value spread = alloc(p, p, f32);
  tensorScalar(spread, broadcastRow(Value(), 1.0, p, p, f32, src), partials, "mul", 0.0, src);
  Value transposed = allocPsum(p, p);
  setSource(b->create<nc::TransposeOp>(loc, transposed, spread), src);
  double identity = alu == "max" ? -std::numeric_limits<double>::infinity() : 0.0;
  Value kept = alloc(p, p, f32);
  setSource(b->create<nc::TensorSelectOp>(loc, kept, transposed, broadcastRow(Value(), identity, p, p, f32, src),
                                          sameRowMask),
            src);
  Value total = alloc(p, 1, f32);
  setSource(b->create<nc::TensorReduceOp>(loc, total, kept, b->getStringAttr(alu)), src);
  return total;
}

std::optional<double> KernelLowering::splatPiece(Value v) {
  while (Operation* def = v.getDefiningOp()) {
    if (!aten::isViewOp(def)) return splatValue(v);
    v = def->getOperand(0);
  }
  auto arg = llvm::dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner()->getParentOp() != kernel.getOperation() || arg.getArgNumber() >= kernel->getNumOperands())
    return std::nullopt;
  return splatValue(kernel->getOperand(arg.getArgNumber()));
}

void KernelLowering::fillConstant(Value tile, double value, Operation* source) {
  setSource(b->create<nc::IotaOp>(loc, tile, b->getF64FloatAttr(value), b->getF64FloatAttr(0.0),
                                  b->getF64FloatAttr(0.0)),
            source);
}

// A Full [p x f] tile holding `imm` plus, when given, the per-row value of
// `rowTile` (iota writes the constant, an add the row value).
Value KernelLowering::broadcastRow(Value rowTile, double imm, int64_t p, int64_t f, Type elem,
                                   Operation* source) {
  auto key = std::make_tuple(llvm::bit_cast<uint64_t>(imm), p, f, elem.getAsOpaquePointer());
  if (!rowTile)
    if (auto it = constantTiles.find(key); it != constantTiles.end()) return it->second;
  Value t = alloc(p, f, elem);
  if (!rowTile) constantTiles[key] = t;
  fillConstant(t, imm, source);
  if (rowTile) tensorScalar(t, t, rowTile, "add", 0.0, source);
  return t;
}

// The layout of the value a slice of the last dim reads, where the kernel
// computes that value; Kind::Full otherwise (a view of HBM, or no slice).
Layout KernelLowering::slicedValueLayout(Value piece) {
  auto slice = piece.getDefiningOp<aten::SliceTensorOp>();
  if (!slice || viewOf.count(piece)) return Layout{};
  auto it = layouts.find(slice.getSelf());
  return it == layouts.end() ? Layout{} : it->second;
}

// A step-1 slice of the last dim, `width` wide, of a value with rows of
// `period` elements of dtype `elem` laid out whole (Kind::Full): that value
// and the slice's first column, or null.
std::pair<Value, int64_t> KernelLowering::sliceOfFullRows(Value piece, int64_t width, Type elem, int64_t period) {
  auto slice = piece.getDefiningOp<aten::SliceTensorOp>();
  if (!slice) return {};
  Value src = slice.getSelf();
  auto st = llvm::cast<RankedTensorType>(src.getType());
  int64_t rank = st.getRank(), from = slice.getStart() < 0 ? slice.getStart() + st.getShape().back() : slice.getStart();
  auto it = layouts.find(src);
  bool lastDim = rank > 0 && (slice.getDim() == rank - 1 || slice.getDim() == -1) && slice.getStep() == 1;
  if (!lastDim || st.getShape().back() != period || st.getElementType() != elem || it == layouts.end() ||
      it->second.kind != Kind::Full || from < 0 || from + width > period)
    return {};
  return {src, from};
}

}  // namespace neuroncc::lowering
