//===- LowerCopies.cpp - copy kernels rearranged in SBUF ------------------===//
//
// Copy kernels whose DMA runs would be short, rearranged in SBUF by engine
// copies so that both their loads and their stores move long runs.
//
// A copy kernel that returns an expand (nearest upsampling, repeat,
// repeat_interleave, a broadcast row or head), possibly through reshapes
// that keep its element order: loading the broadcast view directly would
// read the input once per output element along a broadcast innermost dim
// (one DMA run each); instead each row tile loads the input's rows once,
// widens them in SBUF, and stores whole output runs.
//
// A copy kernel that permutes dims whose common innermost run is short (a
// ViT patch embedding's im2col: runs of 16 pixels): each tile loads its
// dims in the input's order, copies them into the output's order, and
// stores them (lowerPermuteCopy).
//
//===----------------------------------------------------------------------===//

#include "device_model.h"
#include "passes/KernelLowering.h"
#include "llvm/ADT/ScopeExit.h"

#include <cmath>
#include <limits>

namespace neuroncc::lowering {

bool lowersAsExpandCopy(aten::ExpandOp expand) {
  auto in = llvm::cast<RankedTensorType>(expand.getSelf().getType());
  auto out = llvm::cast<RankedTensorType>(expand.getType());
  return llvm::isa<FloatType>(out.getElementType()) && in.getElementType() == out.getElementType() &&
         out.getNumElements() > 0;
}

LogicalResult KernelLowering::tileSpace(ArrayRef<std::pair<int64_t, int64_t>> rows,
                                        ArrayRef<std::pair<int64_t, int64_t>> columns, int64_t offset, Layout* l) {
  space = Space{};
  aten::StridedView v;
  v.offset = offset;
  for (auto [size, stride] : rows) space.lead.push_back(size), v.shape.push_back(size), v.strides.push_back(stride);
  for (auto [size, stride] : columns) space.trail.push_back(size), v.shape.push_back(size), v.strides.push_back(stride);
  space.rows = product(space.lead);
  space.cols = product(space.trail);
  if (!l) return success();
  if (failed(layoutOfView(v, *l))) return failure();
  l->kind = Kind::Full;
  return success();
}

namespace {

// Widening copies per row tile aimed at: the columns shrink (more rows or
// more stores) rather than take more.
constexpr int64_t kMaxExpandCopies = 64;

// One dim of the expand after merging neighbours: broadcast (the input has
// one element along it) or passed through; strides in elements.
struct ExpandDim {
  int64_t size;
  bool broadcast;
  int64_t inStride, outStride;
};

int64_t sizeOf(ArrayRef<ExpandDim> dims, bool inputSide) {
  int64_t n = 1;
  for (const ExpandDim& d : dims) n *= inputSide && d.broadcast ? 1 : d.size;
  return n;
}

// Engine copies that widen a tile laid out as `dims` (broadcast dims of
// one element) into the full dims, innermost broadcast first: each step
// repeats a block of q elements f times under n outer indices, as f x
// min(n, q) copies (n blocks of q, or q columns stepped over the n), or by
// doubling (1 + log2 f copies) when there is one block.
int64_t copiesToWiden(ArrayRef<ExpandDim> dims) {
  int64_t total = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (!dims[i].broadcast) continue;
    const int64_t f = dims[i].size, n = sizeOf(dims.take_front(i), /*inputSide=*/true),
                  q = sizeOf(dims.drop_front(i + 1), /*inputSide=*/false);
    total += n == 1 ? 1 + int64_t(std::ceil(std::log2(double(f)))) : f * std::min(n, q);
  }
  return total;
}

}  // namespace

// The output's dims split into the tile's rows (the leading dims the input
// does not broadcast, and any passed-through dim outside the tile's columns),
// its columns (a suffix of the dims, widened in SBUF), and copy dims
// (broadcast dims outside the columns: the tile is stored once per index).
// With the whole row in the columns and rows consecutive in HBM, short rows
// are packed g to a partition as in rowCatFactor.
LogicalResult KernelLowering::lowerExpandCopy(aten::ExpandOp expand, ArrayRef<Value> outHbm) {
  auto rt = llvm::cast<RankedTensorType>(expand.getType());
  Type elem = nc::deviceElementType(rt.getElementType());
  const aten::StridedView in = viewOf.lookup(expand.getSelf());
  const int64_t rank = rt.getRank(), inRank = int64_t(in.shape.size());
  if (inRank > rank) return expand.emitError("internal: an expand to fewer dims");
  SmallVector<ExpandDim> dims;
  int64_t outStride = rt.getNumElements();
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t size = rt.getDimSize(d), j = d - (rank - inRank);
    outStride /= std::max<int64_t>(size, 1);
    if (size == 1) continue;
    const bool broadcast = j < 0 || in.shape[size_t(j)] == 1;
    ExpandDim dim{size, broadcast, broadcast ? 0 : in.strides[size_t(j)], outStride};
    if (!dims.empty() && dims.back().broadcast == broadcast &&
        (broadcast || dims.back().inStride == dim.inStride * size)) {
      dims.back().size *= size;
      dims.back().inStride = dim.inStride;
      dims.back().outStride = outStride;
      continue;
    }
    dims.push_back(dim);
  }
  if (dims.empty()) dims.push_back(ExpandDim{1, false, 0, 1});
  const size_t firstBroadcast =
      size_t(llvm::find_if(dims, [](const ExpandDim& d) { return d.broadcast; }) - dims.begin());

  // The columns: the longest suffix within maxFree whose widening takes at
  // most kMaxExpandCopies copies (else the one of fewest copies); a last dim
  // longer than maxFree is split by its largest divisor that fits.
  size_t first = dims.size();
  int64_t fewest = std::numeric_limits<int64_t>::max();
  for (size_t c = std::min(firstBroadcast, dims.size() - 1); c < dims.size(); ++c) {
    if (sizeOf(ArrayRef<ExpandDim>(dims).drop_front(c), false) > maxFree) continue;
    int64_t copies = copiesToWiden(ArrayRef<ExpandDim>(dims).drop_front(c));
    if (copies < fewest) fewest = copies, first = c;
    if (copies <= kMaxExpandCopies) break;
  }
  if (first == dims.size()) {
    ExpandDim last = dims.back();
    int64_t k = std::min(last.size, maxFree);
    while (last.size % k != 0) --k;
    dims.back() = ExpandDim{last.size / k, last.broadcast, last.inStride * k, last.outStride * k};
    dims.push_back(ExpandDim{k, last.broadcast, last.inStride, last.outStride});
    first = dims.size() - 1;
  }
  // Broadcast dims outside the columns are stored from each tile once per
  // index, or, while the other rows leave partitions idle, become rows
  // themselves (their rows load the same input).
  SmallVector<ExpandDim> columns(dims.begin() + first, dims.end()), rows, copiesOf;
  int64_t passedRows = 1;
  for (const ExpandDim& d : ArrayRef<ExpandDim>(dims).take_front(first))
    if (!d.broadcast) passedRows *= d.size;
  for (const ExpandDim& d : llvm::reverse(ArrayRef<ExpandDim>(dims).take_front(first))) {
    if (d.broadcast && passedRows >= nc::kNumPartitions) {
      copiesOf.insert(copiesOf.begin(), d);
      continue;
    }
    if (d.broadcast) passedRows *= d.size;
    rows.insert(rows.begin(), d);
  }
  if (rows.empty()) rows.push_back(ExpandDim{1, false, 0, 0});
  const int64_t width = sizeOf(columns, false), inWidth = sizeOf(columns, true);
  int64_t packedStride = 1;
  int64_t numRows = 1;
  for (const ExpandDim& d : rows) numRows *= d.size;

  // Short rows packed g to a partition, as for elementwise kernels (the
  // smallest g whose input runs reach kPackedRunBytes, keeping
  // kMinShortRowTiles row tiles) within the copies aimed at: the rows as one
  // dim, consecutive in the input (at any one stride) and in the output.
  int64_t g = 1;
  const int64_t bytes = std::max<int64_t>(1, rt.getElementTypeBitWidth() / 8);
  auto flat = aten::reshapeStrides(in.shape, in.strides, {numRows * inWidth});
  if (copiesOf.empty() && flat && inWidth * bytes < kShortRowBytes &&
      llvm::none_of(rows, [](const ExpandDim& d) { return d.broadcast; })) {
    SmallVector<ExpandDim> packed{ExpandDim{1, false, 0, 0}};
    packed.append(columns);
    const int64_t cap = std::max(kMaxExpandCopies, copiesToWiden(columns));
    for (int64_t d = 2; d * width <= maxFree && numRows / d >= nc::kNumPartitions * kMinShortRowTiles; ++d) {
      if (numRows % d != 0) continue;
      packed.front().size = d;
      if (copiesToWiden(packed) > cap) break;
      g = d;
      if (d * inWidth * bytes >= kPackedRunBytes) break;
    }
    if (g > 1) {
      const int64_t stride = (*flat)[0];
      packed.front().size = g;
      rows = {ExpandDim{numRows / g, false, stride * inWidth * g, width * g}};
      columns = std::move(packed);
      numRows /= g;
      packedStride = stride;
    }
  }
  const int64_t tileWidth = sizeOf(columns, false), tileInWidth = sizeOf(columns, true);

  // The tile over [rows..., columns]: of the input (its passed-through
  // columns) or of the output, with the matching strides (tileSpace).
  auto layoutOver = [&](bool input, int64_t offset, Layout* l) -> LogicalResult {
    SmallVector<std::pair<int64_t, int64_t>> tileRows, tileCols;
    for (const ExpandDim& d : rows) tileRows.push_back({d.size, input ? d.inStride : d.outStride});
    if (!input || g > 1) {
      tileCols.push_back({input ? tileInWidth : tileWidth, input ? packedStride : 1});
    } else {
      for (const ExpandDim& d : columns)
        if (!d.broadcast) tileCols.push_back({d.size, d.inStride});
      if (tileCols.empty()) tileCols.push_back({1, 0});
    }
    return tileSpace(tileRows, tileCols, offset, l);
  };
  Layout load;
  if (failed(layoutOver(/*input=*/true, in.offset, &load))) return failure();
  int64_t copies = 1;
  for (const ExpandDim& d : copiesOf) copies *= d.size;
  SmallVector<Layout> stores(static_cast<size_t>(copies), Layout{});
  for (int64_t k = 0; k < copies; ++k) {
    int64_t offset = 0, rem = k;
    for (const ExpandDim& d : llvm::reverse(copiesOf)) offset += (rem % d.size) * d.outStride, rem /= d.size;
    if (failed(layoutOver(/*input=*/false, offset, &stores[size_t(k)]))) return failure();
  }

  timesStored = copies;
  ArrayRef<ExpandDim> cols(columns);
  for (r0 = 0; r0 < numRows; r0 += nc::kNumPartitions) {
    const int64_t p = std::min<int64_t>(nc::kNumPartitions, numRows - r0);
    ++iteration;
    Value cur = alloc(p, tileInWidth, elem);
    (void)layoutOver(/*input=*/true, 0, nullptr);
    emitDma(/*load=*/true, hbmOf[expand.getSelf()], cur, load, r0, p, 0, tileInWidth);
    // Widened innermost broadcast dim first: `cur` holds the dims inside
    // the one being widened at full size, those outside it as loaded.
    for (size_t i = cols.size(); i-- > 0;) {
      if (!cols[i].broadcast) continue;
      const int64_t f = cols[i].size, n = sizeOf(cols.take_front(i), true), q = sizeOf(cols.drop_front(i + 1), false);
      Value next = alloc(p, n * f * q, elem);
      if (n == 1) {
        copyTile(tileColumns(*b, loc, next, 0, q), tileColumns(*b, loc, cur, 0, q), expand);
        for (int64_t have = 1; have < f;) {
          const int64_t m = std::min(have, f - have);
          copyTile(tileColumns(*b, loc, next, have * q, m * q), tileColumns(*b, loc, next, 0, m * q), expand);
          have += m;
        }
      } else if (q <= n) {
        for (int64_t k = 0; k < f; ++k)
          for (int64_t e = 0; e < q; ++e)
            copyTile(steppedColumns(*b, loc, next, k * q + e, n, f * q), steppedColumns(*b, loc, cur, e, n, q),
                     expand);
      } else {
        for (int64_t j = 0; j < n; ++j)
          for (int64_t k = 0; k < f; ++k)
            copyTile(tileColumns(*b, loc, next, (j * f + k) * q, q), tileColumns(*b, loc, cur, j * q, q), expand);
      }
      cur = next;
    }
    (void)layoutOver(/*input=*/false, 0, nullptr);
    for (const Layout& store : stores) emitDma(/*load=*/false, outHbm.front(), cur, store, r0, p, 0, tileWidth);
  }
  return success();
}

namespace {

// Elements per contiguous run of `dims` (a tile's free dims, in any order)
// read through `stride`: the dim of stride 1 and those outside it that
// continue it.
int64_t runOf(ArrayRef<CopyDim> dims, int64_t CopyDim::*stride) {
  int64_t run = 1;
  for (bool grew = true; grew;) {
    grew = false;
    for (const CopyDim& d : dims)
      if (d.*stride == run && d.size > 1) {
        run *= d.size;
        grew = true;
      }
  }
  return run;
}

// The dims in the order `stride` lays them out (outermost first).
SmallVector<CopyDim> orderedBy(ArrayRef<CopyDim> dims, int64_t CopyDim::*stride) {
  SmallVector<CopyDim> out(dims);
  llvm::stable_sort(out, [&](const CopyDim& a, const CopyDim& b) { return a.*stride > b.*stride; });
  return out;
}

// Whether the columns' order in the output differs from the input's (the
// loaded tile needs copies into the stored one).
bool reorders(ArrayRef<CopyDim> columns) {
  return llvm::any_of(llvm::zip(orderedBy(columns, &CopyDim::inStride), columns),
                      [](auto pair) { return std::get<0>(pair).outStride != std::get<1>(pair).outStride; });
}

// A rough price (ns) of a plan under the device model's terms (trn1): each
// tile's load and store cut into pieces of 64 KiB or more (at most 8, as
// emitDma cuts them), each piece its fixed cost plus the larger of its
// runs' and its bytes' time, the pieces of all tiles spread over the DMA
// queues; the copies (an instruction's SBUF access plus an element a cycle)
// over the three engines that copy; plus one tile's load, copies and store,
// which nothing overlaps.
double tilePrice(double tiles, double bytes, double loadRuns, double storeRuns, double copies, double width) {
  const neff::DeviceParams& d = neff::Trn1();
  const double bytesPerNs = neff::DmaQueueBytesPerNs(d), copyNs = (d.sbuf_access_cycles + width) / d.vector_ghz;
  auto transfer = [&](double runs, double& latency) {
    const double pieces = std::clamp(std::floor(bytes / 65536.0), 1.0, 8.0);
    latency += d.dma_fixed_ns + std::max(runs / pieces * d.dma_run_ns, bytes / pieces / bytesPerNs);
    return pieces * d.dma_fixed_ns + std::max(runs * d.dma_run_ns, bytes / bytesPerNs);
  };
  double latency = copies * copyNs / 3.0;
  const double dma = tiles * (transfer(loadRuns, latency) + transfer(storeRuns, latency)) / double(d.dma_queues);
  return std::max(dma, tiles * copies * copyNs / 3.0) + latency;
}

}  // namespace

}  // namespace neuroncc::lowering

namespace neuroncc {

using llvm::ArrayRef;
using llvm::SmallVector;

std::optional<SmallVector<CopyDim>> permuteCopyDims(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides) {
  SmallVector<CopyDim> dims;
  int64_t outStride = 1;
  for (int64_t size : shape) outStride *= std::max<int64_t>(size, 1);
  for (auto [size, inStride] : llvm::zip(shape, strides)) {
    outStride /= std::max<int64_t>(size, 1);
    if (size == 1) continue;
    if (inStride <= 0) return std::nullopt;  // broadcasts: lowerExpandCopy
    if (!dims.empty() && dims.back().inStride == inStride * size) {
      dims.back() = CopyDim{dims.back().size * size, inStride, outStride};
      continue;
    }
    dims.push_back(CopyDim{size, inStride, outStride});
  }
  return dims;
}

// A copy of a permuting view (no broadcast) whose common innermost run is
// short moves one DMA run per such run, loading and storing. Each tile
// instead takes some output dims onto its partitions and others into its
// columns, loads them in the input's order, copies them into the output's
// order along the widest dim, and stores them; the remaining dims are a
// tile each. Any dims may go on the partitions, not only the output's
// outermost: a strided convolution's phases ([s, s, N, C, p, q] of the
// padded [N, C, p, s, q, s]) take N x C onto the partitions and load each
// plane whole into the columns, where a prefix of the output's dims held a
// phase at a time, read an element per run. Of all such splits that fit
// maxFree, the one tilePrice rates lowest, if it beats the direct copy by a
// quarter (false otherwise).
bool choosePermuteSplit(ArrayRef<CopyDim> dims, int64_t elementBytes, int64_t maxFree, PermuteSplit& split) {
  using lowering::kShortRowBytes, lowering::reorders, lowering::runOf, lowering::tilePrice;
  int64_t total = 1;
  for (const CopyDim& d : dims) total *= d.size;
  const int64_t bytes = elementBytes;
  // Each dim is a row, column or loop dim: 3^dims plans.
  constexpr size_t kMaxPlannedDims = 8;
  if (dims.size() < 2 || dims.size() > kMaxPlannedDims || total == 0) return false;
  // The common run: 1 where the output's innermost dim is strided in the
  // input (the direct copy then loads blocks transposed on the TensorEngine,
  // loadTransposed, which suits wide blocks: pixel_shuffle's blocks of two
  // columns took 251.6 us for [2, 64, 20, 20] bf16, 19.1 rearranged).
  const int64_t run = dims.back().inStride == 1 ? dims.back().size : 1;
  if (run * bytes >= kShortRowBytes) return false;
  // The direct copy: rows of the common run, 128 to a tile.
  const double directTiles = std::ceil(double(total) / double(run * nc::kNumPartitions));
  const double direct = tilePrice(directTiles, double(nc::kNumPartitions * run * bytes), nc::kNumPartitions,
                                  nc::kNumPartitions, 0, 0);
  // Plans: the partitions over the row dims, the columns over the column
  // dims and g consecutive indices of the innermost row dim, where rows
  // remain for the partitions (tiny blocks: transposing the last two dims
  // of [1024, 8, 4, 4] takes 64 blocks a partition, copied 16 times along
  // them, where a tile of 128 blocks of 16 elements was too small). Only
  // where that makes the loads' and the stores' runs a quarter of
  // kShortRowBytes (128 bytes) or more:
  // the direct copy's price counts a run per element where the output's
  // innermost dim is strided, but it loads wide blocks transposed (64 x 512
  // x 512 bf16 transposed: 317.0 us; 8 indices of dim 1 a partition, runs of
  // 16 bytes, priced as cheaper: 2771.2).
  enum Role : uint8_t { kRow, kColumn, kLoop };
  struct Plan {
    SmallVector<Role, 8> roles;
    int64_t group = 1;  // g
    double price = std::numeric_limits<double>::infinity();
  } best;
  const size_t n = dims.size();
  // Each dim's divisors up to maxFree, ascending: the candidates for g.
  SmallVector<SmallVector<int64_t, 16>, 8> divisors(n);
  for (size_t i = 0; i < n; ++i)
    for (int64_t g = 1; g <= dims[i].size && g <= maxFree; ++g)
      if (dims[i].size % g == 0) divisors[i].push_back(g);
  SmallVector<Role, 8> roles(n, kRow);
  // The next assignment of roles (a base-3 counter over the dims); false
  // after the last.
  auto advance = [&] {
    for (size_t i = 0; i < n; ++i) {
      if (roles[i] != kLoop) {
        roles[i] = Role(roles[i] + 1);
        return true;
      }
      roles[i] = kRow;
    }
    return false;
  };
  for (bool more = true; more;) {
    const SmallVector<Role, 8> current = roles;
    more = advance();
    int64_t innermostRow = -1, outerRows = 1, loops = 1;
    for (size_t i = 0; i < n; ++i) {
      if (current[i] == kRow) {
        if (innermostRow >= 0) outerRows *= dims[size_t(innermostRow)].size;
        innermostRow = int64_t(i);
      } else if (current[i] == kLoop) {
        loops *= dims[i].size;
      }
    }
    if (innermostRow < 0) continue;
    const CopyDim& last = dims[size_t(innermostRow)];
    const bool anyColumn = llvm::is_contained(current, kColumn);
    for (int64_t g : divisors[size_t(innermostRow)]) {
      const int64_t rows = outerRows * (last.size / g);
      if (g > 1 && rows < nc::kNumPartitions) break;
      if (g == 1 && !anyColumn) continue;
      const int64_t rowTiles = (rows + nc::kNumPartitions - 1) / nc::kNumPartitions,
                    p = std::min(rows, nc::kNumPartitions);
      // The columns in the output's order.
      SmallVector<CopyDim> cols;
      for (size_t i = 0; i < n; ++i) {
        if (current[i] == kColumn) cols.push_back(dims[i]);
        if (int64_t(i) == innermostRow && g > 1) cols.push_back(CopyDim{g, last.inStride, last.outStride});
      }
      int64_t f = 1, widest = 1;
      for (const CopyDim& d : cols) f *= d.size, widest = std::max(widest, d.size);
      if (f > maxFree) continue;
      const bool reordered = reorders(cols);
      // A quarter of the partitions or more, loads and stores of runs
      // several times the direct copy's, copies a few elements wide, and
      // tiles of 32 KiB or more (a quarter of a smaller copy): smaller ones
      // wait on each other more than the price counts.
      const int64_t runIn = runOf(cols, &CopyDim::inStride), runOut = runOf(cols, &CopyDim::outStride);
      if (g > 1 && std::min(runIn, runOut) * bytes < kShortRowBytes / 4) continue;
      if (p < nc::kNumPartitions / 4 || runIn < 4 * run || runOut < 4 * run || (reordered && widest < 8) ||
          p * f * bytes < std::min<int64_t>(total * bytes / 4, 32 * 1024))
        continue;
      const double copies = reordered ? double(f / widest) : 0;
      const double price = tilePrice(double(rowTiles * loops), double(p * f * bytes), double(p * (f / runIn)),
                                     double(p * (f / runOut)), copies, double(widest));
      if (price < best.price) best = Plan{current, g, price};
    }
  }
  if (!(best.price < 0.75 * direct)) return false;

  split = PermuteSplit{};
  for (size_t i = 0; i < n; ++i) {
    if (best.roles[i] == kRow) split.rows.push_back(dims[i]);
    else if (best.roles[i] == kColumn) split.columns.push_back(dims[i]);
    else split.loops.push_back(dims[i]);
    if (best.roles[i] != kRow || best.group == 1 || llvm::is_contained(ArrayRef(best.roles).drop_front(i + 1), kRow))
      continue;
    // The innermost row dim: its inner g indices join the columns.
    CopyDim& last = split.rows.back();
    split.columns.push_back(CopyDim{best.group, last.inStride, last.outStride});
    last = CopyDim{last.size / best.group, last.inStride * best.group, last.outStride * best.group};
  }
  return true;
}

bool readsTinyTransposedBlocks(ArrayRef<CopyDim> dims, int64_t elementBytes) {
  if (dims.size() < 2 || dims.back().inStride == 1) return false;
  const CopyDim* contiguous = llvm::find_if(dims, [](const CopyDim& d) { return d.inStride == 1; });
  return contiguous != dims.end() &&
         std::min(dims.back().size, contiguous->size) * elementBytes < lowering::kShortRowBytes;
}

}  // namespace neuroncc

namespace neuroncc::lowering {

bool KernelLowering::planPermuteCopy(Value copied, PermuteCopyPlan& plan) {
  auto rt = llvm::cast<RankedTensorType>(copied.getType());
  if (!llvm::isa<FloatType>(rt.getElementType()) || !viewOf.count(copied) ||
      !llvm::isa<BlockArgument>(aten::viewChainRoot(copied)))
    return false;
  const aten::StridedView view = viewOf.lookup(copied);
  auto arg = llvm::cast<BlockArgument>(aten::viewChainRoot(copied));
  if (llvm::cast<RankedTensorType>(arg.getType()).getElementType() != rt.getElementType() ||
      int64_t(view.shape.size()) != rt.getRank())
    return false;
  std::optional<SmallVector<CopyDim>> dims = permuteCopyDims(rt.getShape(), view.strides);
  const int64_t bytes = std::max<int64_t>(1, rt.getElementTypeBitWidth() / 8);
  if (!dims || !choosePermuteSplit(*dims, bytes, maxFree, plan)) return false;
  plan.view = view;
  return true;
}

LogicalResult KernelLowering::lowerPermuteCopy(Value copied, const PermuteCopyPlan& plan, ArrayRef<Value> outHbm) {
  auto rt = llvm::cast<RankedTensorType>(copied.getType());
  ArrayRef<CopyDim> rowDims = plan.rows, cols = plan.columns, loopDims = plan.loops;
  const aten::StridedView& view = plan.view;
  const SmallVector<CopyDim> loaded = orderedBy(cols, &CopyDim::inStride);
  int64_t f = 1, numRows = 1, loops = 1;
  for (const CopyDim& d : cols) f *= d.size;
  for (const CopyDim& d : rowDims) numRows *= d.size;
  for (const CopyDim& d : loopDims) loops *= d.size;
  // The space and layout of a tile: rows, then the columns in `order`.
  auto layoutOver = [&](ArrayRef<CopyDim> order, int64_t CopyDim::*stride, int64_t offset, Layout* l) {
    SmallVector<std::pair<int64_t, int64_t>> rows, columns;
    for (const CopyDim& d : rowDims) rows.push_back({d.size, d.*stride});
    for (const CopyDim& d : order) columns.push_back({d.size, d.*stride});
    return tileSpace(rows, columns, offset, l);
  };
  // Each column dim's column step in the loaded tile and in the stored one.
  auto tileSteps = [&](ArrayRef<CopyDim> order) {
    llvm::SmallDenseMap<int64_t, int64_t, 8> step;  // by output stride (unique per dim)
    int64_t s = 1;
    for (const CopyDim& d : llvm::reverse(order)) step[d.outStride] = s, s *= d.size;
    return step;
  };
  auto inStep = tileSteps(loaded), outStep = tileSteps(cols);
  size_t widest = 0;
  for (size_t i = 0; i < cols.size(); ++i)
    if (cols[i].size > cols[widest].size) widest = i;
  const bool reordered = reorders(cols);
  Type elem = nc::deviceElementType(rt.getElementType());
  Operation* source = copied.getDefiningOp();
  spaceRepeats = loops;
  auto resetRepeats = llvm::make_scope_exit([&] { spaceRepeats = 1; });
  for (int64_t loop = 0; loop < loops; ++loop) {
    int64_t inOffset = view.offset, outOffset = 0;
    for (int64_t rem = loop, i = int64_t(loopDims.size()) - 1; i >= 0; --i) {
      const CopyDim& d = loopDims[size_t(i)];
      inOffset += (rem % d.size) * d.inStride;
      outOffset += (rem % d.size) * d.outStride;
      rem /= d.size;
    }
    Layout load, store;
    if (failed(layoutOver(cols, &CopyDim::outStride, outOffset, &store)) ||
        failed(layoutOver(loaded, &CopyDim::inStride, inOffset, &load)))
      return failure();
    for (r0 = 0; r0 < numRows; r0 += nc::kNumPartitions) {
      const int64_t p = std::min<int64_t>(nc::kNumPartitions, numRows - r0);
      ++iteration;
      Value in = alloc(p, f, elem);
      (void)layoutOver(loaded, &CopyDim::inStride, 0, nullptr);  // (emitDma reads the space)
      emitDma(/*load=*/true, hbmOf[copied], in, load, r0, p, 0, f);
      Value out = in;
      if (reordered) {
        out = alloc(p, f, elem);
        const CopyDim& w = cols[widest];
        const int64_t copies = f / w.size;
        for (int64_t c = 0; c < copies; ++c) {
          int64_t from = 0, to = 0;
          for (int64_t rem = c, i = int64_t(cols.size()) - 1; i >= 0; --i) {
            if (size_t(i) == widest) continue;
            const CopyDim& d = cols[size_t(i)];
            from += (rem % d.size) * inStep[d.outStride];
            to += (rem % d.size) * outStep[d.outStride];
            rem /= d.size;
          }
          copyTile(steppedColumns(*b, loc, out, to, w.size, outStep[w.outStride]),
                   steppedColumns(*b, loc, in, from, w.size, inStep[w.outStride]), source);
        }
      }
      (void)layoutOver(cols, &CopyDim::outStride, 0, nullptr);
      emitDma(/*load=*/false, outHbm.front(), out, store, r0, p, 0, f);
    }
  }
  return success();
}

}  // namespace neuroncc::lowering
