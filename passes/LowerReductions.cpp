//===- LowerReductions.cpp - reductions over middle dims in SBUF rows ------===//
//
// A kernel that is one sum, mean or amax over a run of middle dims of an
// input ([A, R, C] reduced over R, C > 1) reads, in the general lowering,
// its input through a permutation that puts R last: rows of R elements a
// C apart, one DMA run per element. Here each partition instead loads rows
// of A whole (R x C elements, in the input's order, one run where the input
// is contiguous), the engines reduce each row's R blocks of C elements
// through stepped views of the tile, and the [A, C] result is stored in
// runs of C.
//
//===----------------------------------------------------------------------===//

#include "device_model.h"
#include "passes/KernelLowering.h"
#include "passes/ReductionCost.h"

#include <cmath>
#include <limits>
#include <tuple>

namespace neuroncc {

namespace {

// Cycles of the reduction's instructions for one tile of p partitions, per
// method, under the device model's formulas (device_model.cc): g rows of
// r x c elements per partition reduced into g x c f32 values, added to the
// values of earlier tiles unless `first`.
double methodCycles(MiddleReductionMethod m, int64_t g, int64_t r, int64_t c, bool bf16Input, bool first) {
  const double access = neff::Trn1().sbuf_access_cycles;
  auto add = [&](int64_t n) { return std::max(64.0, 2.0 * double(n)) + access; };
  const int64_t adds = first ? r - 1 : r;
  switch (m) {
    case MiddleReductionMethod::PerColumn:
      return double(g * c) * ((bf16Input ? std::max(1.0, double(r) / 2) : double(r)) + access) +
             (first ? 0.0 : add(g * c));
    case MiddleReductionMethod::AcrossRows:
      return double(adds * c) * add(g);
    case MiddleReductionMethod::PerBlock:
      return double(adds * g) * add(c);
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace

std::pair<MiddleReductionMethod, double> cheapestMiddleReduction(int64_t g, int64_t R, int64_t rChunk, int64_t chunk,
                                                                 bool bf16Input, bool sharedEngines) {
  const neff::DeviceParams& d = neff::Trn1();
  std::pair<MiddleReductionMethod, double> best{MiddleReductionMethod::PerBlock,
                                                std::numeric_limits<double>::infinity()};
  const int64_t steps = (R + rChunk - 1) / rChunk;
  for (auto m : {MiddleReductionMethod::PerBlock, MiddleReductionMethod::AcrossRows, MiddleReductionMethod::PerColumn}) {
    const double cycles = methodCycles(m, g, rChunk, chunk, bf16Input, true) +
                          double(steps - 1) * methodCycles(m, g, rChunk, chunk, bf16Input, false);
    const bool shared = sharedEngines && m != MiddleReductionMethod::PerColumn;
    const double ns = cycles / (shared ? d.vector_ghz + d.gpsimd_ghz : d.vector_ghz);
    if (ns < best.second) best = {m, ns};
  }
  return best;
}

std::pair<int64_t, int64_t> middleReductionTile(int64_t R, int64_t C, int64_t maxFree) {
  const int64_t chunk = std::min(C, maxFree);
  return {std::min(R, std::max<int64_t>(1, maxFree / chunk)), chunk};
}

double sbufRowsReductionNs(int64_t A, int64_t R, int64_t C, bool bf16Input, int64_t maxFree) {
  const auto [rChunk, chunk] = middleReductionTile(R, C, maxFree);
  const double tiles = double((A + nc::kNumPartitions - 1) / nc::kNumPartitions) * double((C + chunk - 1) / chunk);
  // Two tiles or more share the engines, as do a tile's two accumulators
  // (lowerMiddleReduction) where it takes R in two steps or more.
  return tiles * cheapestMiddleReduction(1, R, rChunk, chunk, bf16Input, tiles >= 2 || R > rChunk).second;
}

double matmulRowsSumNs(int64_t A, int64_t R, int64_t C, bool f32Input) {
  const neff::DeviceParams& d = neff::Trn1();
  double tensor = 0, evacuation = 0;
  for (int64_t c0 = 0; c0 < C; c0 += 512) {
    const double n = double(std::min<int64_t>(512, C - c0));
    tensor += double((R + nc::kNumPartitions - 1) / nc::kNumPartitions) *
              (64.0 + std::max(n, 64.0) * (f32Input ? 4.0 : 1.0) + d.sbuf_access_cycles) / d.tensor_ghz;
    evacuation += (std::max(n, 64.0) + d.sbuf_access_cycles) / d.vector_ghz;
  }
  const double transfers = 2.0 * d.dma_fixed_ns / double(d.dma_queues);
  return double(A) * (std::max(tensor, evacuation / 2.0) + transfers);
}

std::optional<MiddleFrameSplit> chooseMiddleFrameSplit(llvm::ArrayRef<int64_t> shape, int64_t first, int64_t last,
                                                       int64_t bytesPerElement, int64_t budget, bool allowChunks,
                                                       int64_t maxColumns, int64_t maxChunk) {
  // Room left for the per-column values and the planner's alignment.
  constexpr int64_t kReserve = 4096;
  const int64_t rank = int64_t(shape.size());
  if (first < 0 || last < first || last >= rank - 1) return std::nullopt;
  int64_t A = 1, R = 1, C = 1;
  for (int64_t d = 0; d < rank; ++d) (d < first ? A : d <= last ? R : C) *= shape[size_t(d)];
  if (A == 0 || R == 0 || C == 0) return std::nullopt;
  const int64_t outer = shape[size_t(first)], inner = R / outer;
  const int64_t minColumns = std::min(C, kMinMiddleFrameColumns);
  for (bool chunked : {false, true}) {
    if ((!chunked && outer > maxChunk) || (chunked && !allowChunks)) continue;
    std::optional<MiddleFrameSplit> best;
    double bestScore = 0;
    int64_t kept = 1;  // the kept dims after `dim`
    for (int64_t dim = rank - 1; dim > last; --dim) {
      const int64_t size = shape[size_t(dim)];
      // (The whole dim is width 1 of the dim before it, but for the first.)
      for (int64_t width = 1; width <= size; ++width) {
        if (size % width || (width == size && dim > last + 1 && size > 1)) continue;
        const int64_t columns = width * kept;
        if (columns < minColumns || columns > maxColumns) continue;
        const int64_t rows = A * (C / columns);
        if (rows < kMinMiddleFrameRows) continue;
        int64_t chunk = outer;
        // Chunks only where the row tiles are three quarters full or more:
        // each chunk's instructions run on the rows' partitions, where the
        // permuted frame's rows (A x C of them) fill all 128 (bf16
        // `F.normalize(x, dim=1)` of [8, 256, 32, 32], 64 rows of 128
        // columns: its norm took 89.9 us in chunks, 50.6 permuted; the sum
        // of squares of [8, 96, 56, 56], 112 rows: 58.0, 107.2 permuted).
        const int64_t tiles = (rows + nc::kNumPartitions - 1) / nc::kNumPartitions;
        if (chunked && 4 * rows < 3 * tiles * nc::kNumPartitions) continue;
        if (chunked) {
          // The most indices of the first reduced dim a chunk fits, then
          // as many in each chunk as the chunks need.
          chunk = std::min({outer - 1, maxChunk, (budget - kReserve) / (inner * columns * bytesPerElement)});
          if (chunk < 1) continue;
          const int64_t chunks = (outer + chunk - 1) / chunk;
          chunk = (outer + chunks - 1) / chunks;
        } else if (R * columns * bytesPerElement + kReserve > budget) {
          continue;
        }
        // Partition time: whole row tiles of R blocks, an instruction's
        // minimum cost under 64 elements.
        const double score = double(tiles) * double(R) * double(std::max<int64_t>(columns, 64));
        if (!best || score < bestScore || (score == bestScore && columns > best->columns)) {
          best = MiddleFrameSplit{dim, width, columns, rows, chunk};
          bestScore = score;
        }
      }
      kept *= size;
    }
    if (best) return best;
  }
  return std::nullopt;
}

}  // namespace neuroncc

namespace neuroncc::lowering {

// The reduction's input view, merged into [rows..., R, C] (unit dims
// dropped; R and C each one dim, C contiguous, or the plan fails; 128 rows
// or more), the rows packed g to a partition where a partition's R x C
// elements are short, R in steps and C in chunks that fit maxFree, and the
// cheapest of the three ways to reduce.
bool KernelLowering::planMiddleReduction(Operation* reduction, MiddleReductionPlan& plan) {
  Value x = reduction->getOperand(0);
  auto in = llvm::cast<RankedTensorType>(x.getType());
  auto out = llvm::cast<RankedTensorType>(reduction->getResult(0).getType());
  if (!llvm::isa<FloatType>(in.getElementType()) || !llvm::isa<FloatType>(out.getElementType()) ||
      !viewOf.count(x) || in.getNumElements() == 0)
    return false;
  const aten::StridedView view = viewOf.lookup(x);
  if (int64_t(view.shape.size()) != in.getRank()) return false;
  SmallVector<int64_t> dims = aten::reducedDims(reduction);
  if (dims.empty()) return false;  // (a reduction of a 0-d tensor)
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] != dims[0] + int64_t(i)) return false;
  const int64_t first = dims.front(), last = dims.back();
  plan = MiddleReductionPlan{};
  plan.reduction = reduction;
  plan.offset = view.offset;
  // Merges dims [from, to) into one (size, stride), false where they do not
  // continue each other; unit dims count for nothing.
  auto merge = [&](int64_t from, int64_t to, int64_t& size, int64_t& stride) {
    size = 1, stride = 0;
    for (int64_t d = to - 1; d >= from; --d) {
      const int64_t n = view.shape[size_t(d)], s = view.strides[size_t(d)];
      if (n == 1) continue;
      if (size > 1 && s != stride * size) return false;
      if (size == 1) stride = s;
      size *= n;
    }
    return true;
  };
  if (!merge(first, last + 1, plan.R, plan.rStride) || !merge(last + 1, in.getRank(), plan.C, plan.cStride))
    return false;
  // C must be the input's innermost run: with any other stride each
  // element would be a DMA run of its own (a transposed input), where the
  // permuted read takes R's runs.
  if (plan.R < 2 || plan.C < 2 || plan.cStride != 1) return false;
  // The output's element (a, c) is at a * C + c.
  int64_t outStride = plan.C;
  for (int64_t d = first - 1; d >= 0; --d) {
    const int64_t n = view.shape[size_t(d)];
    if (n == 1) continue;
    plan.rows.insert(plan.rows.begin(), CopyDim{n, view.strides[size_t(d)], outStride});
    outStride *= n;
  }
  int64_t numRows = 1;
  for (const CopyDim& d : plan.rows) numRows *= d.size;
  // Few rows leave partitions idle; the TensorEngine's sum (FormKernels'
  // sumLeadingDimsByMatmul) or the permuted rows serve those.
  if (numRows < nc::kNumPartitions) return false;
  const int64_t bytes = std::max<int64_t>(1, in.getElementTypeBitWidth() / 8);
  // A tile holds whole blocks of C where they fit, as many steps of R as
  // fit, so that a contiguous input is read in runs of rChunk x C.
  std::tie(plan.rChunk, plan.chunk) = middleReductionTile(plan.R, plan.C, maxFree);
  // Short rows: g consecutive rows of the innermost row dim to a partition,
  // aiming at runs of kPackedRunBytes while 128 partitions stay busy.
  const CopyDim inner = plan.rows.back();
  if (plan.rChunk == plan.R && plan.chunk == plan.C && plan.R * plan.C * bytes < kShortRowBytes &&
      inner.inStride == plan.R * plan.C && plan.rStride == plan.C)
    for (int64_t g = 2; g <= inner.size && g * plan.R * plan.C <= maxFree && numRows / g >= nc::kNumPartitions;
         ++g) {
      if (inner.size % g) continue;
      plan.group = g;
      if (g * plan.R * plan.C * bytes >= kPackedRunBytes) break;
    }
  plan.method = cheapestMiddleReduction(plan.group, plan.R, plan.rChunk, plan.chunk, in.getElementType().isBF16(),
                                       numRows / plan.group > nc::kNumPartitions || plan.R > plan.rChunk ||
                                           plan.C > plan.chunk)
                    .first;
  return true;
}

// Two accumulators: with one, every step's adds are one chain, which runs
// on one engine at a time; two chains share the Vector and GpSimd engines.
Value KernelLowering::reduceMiddleStep(std::array<Value, 2>& accs, int64_t step, int64_t steps, Value tile, int64_t p,
                                       int64_t g, int64_t r, int64_t c, MiddleReductionMethod method, StringRef alu,
                                       Operation* src) {
  Value& into = accs[size_t(step % 2)];
  if (!into) into = alloc(p, g * c, b->getF32Type());
  reduceMiddleTile(into, tile, g, r, c, method, alu, /*started=*/step >= 2, src);
  if (step + 1 < steps) return Value();
  if (steps > 1) setSource(b->create<nc::TensorTensorOp>(loc, accs[0], accs[0], accs[1], b->getStringAttr(alu)), src);
  return accs[0];
}

void KernelLowering::reduceMiddleTile(Value acc, Value tile, int64_t g, int64_t r, int64_t c,
                                      MiddleReductionMethod method, StringRef alu, bool started, Operation* src) {
  Type f32 = b->getF32Type();
  auto binary = [&](Value o, Value a, Value v) {
    setSource(b->create<nc::TensorTensorOp>(loc, o, a, v, b->getStringAttr(alu)), src);
  };
  // Adds `next` into `sum`, or starts it with `next` (and `after`, the step
  // that follows in the same tile, where there is one: true if taken).
  auto accumulate = [&](Value sum, Value next, Value after) {
    if (started) binary(sum, sum, next);
    else if (after) binary(sum, next, after);
    else copyTile(sum, next, src);
    return !started && after;
  };
  switch (method) {
    case MiddleReductionMethod::PerColumn: {
      Value into = started ? alloc(llvm::cast<MemRefType>(acc.getType()).getDimSize(0), g * c, f32) : acc;
      for (int64_t j = 0; j < g; ++j)
        for (int64_t k = 0; k < c; ++k)
          setSource(b->create<nc::TensorReduceOp>(loc, tileColumns(*b, loc, into, j * c + k, 1),
                                                  steppedColumns(*b, loc, tile, j * r * c + k, r, c),
                                                  b->getStringAttr(alu)),
                    src);
      if (started) binary(acc, acc, into);
      break;
    }
    case MiddleReductionMethod::AcrossRows:
      for (int64_t k = 0; k < c; ++k) {
        auto step = [&](int64_t i) { return steppedColumns(*b, loc, tile, i * c + k, g, r * c); };
        Value sum = steppedColumns(*b, loc, acc, k, g, c);
        for (int64_t i = accumulate(sum, step(0), r > 1 ? step(1) : Value()) ? 2 : 1; i < r; ++i)
          binary(sum, sum, step(i));
      }
      break;
    case MiddleReductionMethod::PerBlock:
      for (int64_t j = 0; j < g; ++j) {
        auto block = [&](int64_t i) { return tileColumns(*b, loc, tile, (j * r + i) * c, c); };
        Value sum = tileColumns(*b, loc, acc, j * c, c);
        for (int64_t i = accumulate(sum, block(0), r > 1 ? block(1) : Value()) ? 2 : 1; i < r; ++i)
          binary(sum, sum, block(i));
      }
      break;
  }
}

LogicalResult KernelLowering::lowerMiddleReduction(const MiddleReductionPlan& plan, ArrayRef<Value> outHbm) {
  Operation* red = plan.reduction;
  Value x = red->getOperand(0);
  Type inElem = nc::deviceElementType(llvm::cast<RankedTensorType>(x.getType()).getElementType());
  Type outElem = nc::deviceElementType(llvm::cast<RankedTensorType>(red->getResult(0).getType()).getElementType());
  Type f32 = b->getF32Type();
  const bool mean = llvm::isa<aten::MeanDimOp>(red);
  StringRef alu = llvm::isa<aten::AmaxOp>(red) ? "max" : "add";
  const int64_t g = plan.group, R = plan.R, C = plan.C;
  // The rows: the row dims with the innermost split [n / g, g], g moving
  // into the columns.
  SmallVector<CopyDim> rowDims(plan.rows);
  rowDims.back().size /= g;
  int64_t numRows = 1;
  for (const CopyDim& d : rowDims) numRows *= d.size;
  const CopyDim inner = plan.rows.back();
  // The space and layout of a tile: the rows, then `cols` (size, stride).
  auto layoutOver = [&](ArrayRef<std::pair<int64_t, int64_t>> cols, int64_t CopyDim::*stride, int64_t offset,
                        Layout* l) {
    SmallVector<std::pair<int64_t, int64_t>> rows;
    for (const CopyDim& d : rowDims) rows.push_back({d.size, d.*stride * (&d == &rowDims.back() ? g : 1)});
    return tileSpace(rows, cols, offset, l);
  };
  for (int64_t c0 = 0; c0 < C; c0 += plan.chunk) {
    const int64_t c = std::min(plan.chunk, C - c0);
    const SmallVector<std::pair<int64_t, int64_t>> storeCols{{g, inner.outStride}, {c, 1}};
    Layout store;
    if (failed(layoutOver(storeCols, &CopyDim::outStride, c0, &store))) return failure();
    for (r0 = 0; r0 < numRows; r0 += nc::kNumPartitions) {
      const int64_t p = std::min<int64_t>(nc::kNumPartitions, numRows - r0);
      ++iteration;
      // acc[j * c + k] = reduce over r of in[j, r, k], rChunk steps at a
      // time. Steps alternate between two accumulators, combined at the
      // end: one accumulator makes every step's adds one chain, which runs
      // on one engine at a time (amax over the 128 channels of
      // [128, 128, 768]: 127 maxima of 1.1 us in sequence, against 88 us
      // of loads); two chains share the Vector and GpSimd engines.
      const int64_t steps = (R + plan.rChunk - 1) / plan.rChunk;
      std::array<Value, 2> accs{alloc(p, g * c, f32), steps > 1 ? alloc(p, g * c, f32) : Value()};
      Value acc;
      for (int64_t s0 = 0; s0 < R; s0 += plan.rChunk) {
        const int64_t step = s0 / plan.rChunk;
        // Each chunk of r is an iteration of the memory plan, so that its
        // load goes to other bytes than the chunks still being reduced and
        // need not wait for them (one iteration for the whole row tile gave
        // every chunk the same bytes: amax over the 128 channels of
        // [128, 128, 768] loaded, then reduced, chunk after chunk).
        if (s0 > 0) ++iteration;
        const int64_t r = std::min(plan.rChunk, R - s0);
        const SmallVector<std::pair<int64_t, int64_t>> loadCols{
            {g, inner.inStride}, {r, plan.rStride}, {c, plan.cStride}};
        Layout load;
        if (failed(layoutOver(loadCols, &CopyDim::inStride, plan.offset + c0 * plan.cStride + s0 * plan.rStride,
                              &load)))
          return failure();
        Value tile = alloc(p, g * r * c, inElem);
        emitDma(/*load=*/true, hbmOf[x], tile, load, r0, p, 0, g * r * c);
        acc = reduceMiddleStep(accs, step, steps, tile, p, g, r, c, plan.method, alu, red);
      }
      Value result = acc;
      if (mean || outElem != f32) {
        result = alloc(p, g * c, outElem);
        tensorScalar(result, acc, Value(), "mul", mean ? 1.0 / double(R) : 1.0, red);
      }
      (void)layoutOver(storeCols, &CopyDim::outStride, 0, nullptr);  // (emitDma reads the space)
      emitDma(/*load=*/false, outHbm.front(), result, store, r0, p, 0, g * c);
    }
  }
  return success();
}

}  // namespace neuroncc::lowering
