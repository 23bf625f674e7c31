#include "schedule.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <queue>

#include "absl/strings/str_cat.h"
#include "boundary_accesses.h"
#include "race_check.h"

namespace neuroncc::rt {

using neff::Instruction;

namespace {

constexpr uint32_t Q = neff::kMaxQueues;
using QueueCounts = BoundaryAccesses::QueueCounts;

// Every memory an instruction can touch, as one address space: a tag (which
// memory) in the top bits, the byte address below. The arena is one memory,
// so intermediates that the planner placed on the same bytes conflict; graph
// outputs are memories of their own. Graph inputs and constants are never
// written (the verifier refuses it), so reading them conflicts with nothing.
// Addresses that collide (more than 2^20 tensors) only add waits.
constexpr int kTagShift = 44;
enum : uint64_t { kSbufTag = 0, kPsumTag = 1, kArenaTag = 2, kTensorTag0 = 3 };
uint64_t Address(uint64_t tag, uint64_t byte) { return (tag << kTagShift) | byte; }

struct Access {
  uint64_t lo, hi;  // [lo, hi)
  bool write;
};

// The bytes an instruction reads and writes. On-chip tiles are taken over all
// partitions (a byte range of the partition address space): a kernel's tiles
// span partition 0 up, so this rarely adds a wait, and it keeps the map one-
// dimensional. HBM accesses are taken from the lowest to the highest element
// the access pattern reaches (a gather: every row of its table).
void Footprint(const Instruction& inst, const neff::Executable& exe, std::vector<Access>* out) {
  out->clear();
  for (const neff::OnChipRegion& r : neff::OnChipFootprint(inst)) {
    uint64_t tag = r.space == neff::PSUM ? kPsumTag : kSbufTag;
    out->push_back({Address(tag, r.b0), Address(tag, r.b1), r.write});
  }
  if (!neff::IsDma(inst.opcode())) return;
  auto hbm = [&](uint32_t tensor, int64_t first, int64_t last, bool write) {
    const neff::Tensor& t = exe.tensors(int(tensor));
    if (t.kind() == neff::INPUT || t.kind() == neff::CONSTANT) return;
    const uint64_t size = neff::DTypeSize(t.dtype());
    const uint64_t lo = uint64_t(first) * size, hi = uint64_t(last + 1) * size;
    if (t.kind() == neff::INTERMEDIATE)
      out->push_back({Address(kArenaTag, t.arena_offset() + lo), Address(kArenaTag, t.arena_offset() + hi), write});
    else
      out->push_back({Address(kTensorTag0 + tensor, lo), Address(kTensorTag0 + tensor, hi), write});
  };
  const neff::AccessPattern& ap = inst.hbm();
  const bool gather = inst.opcode() == neff::DMA_GATHER;
  int64_t lo = ap.offset(), hi = ap.offset();
  for (int i = 0; i < ap.dims_size(); ++i) {
    const int64_t count = gather && i == 0 ? int64_t(inst.index_bound()) : ap.dims(i).count();
    const int64_t span = (count - 1) * ap.dims(i).stride();  // bounded by the verifier
    (span < 0 ? lo : hi) += span;
  }
  hbm(ap.tensor(), lo, hi, inst.opcode() == neff::DMA_STORE);
  if (gather)
    hbm(inst.index_tensor(), inst.index_offset(),
        inst.index_offset() + int64_t(inst.out().partitions()) - 1, false);
}

struct Entry {
  uint32_t kernel;
  uint32_t instruction;
  uint32_t first_wait;  // into the flat wait list
  uint32_t wait_count;
};

absl::StatusOr<DispatchSchedule> Simulate(const std::vector<const neff::Kernel*>& kernels, int first_kernel,
                                          const neff::Executable* exe, const neff::DeviceParams& device) {
  std::vector<std::vector<uint32_t>> queue(Q);  // entry ids in issue order
  std::vector<Entry> entries;
  std::vector<std::pair<uint32_t, uint32_t>> waits;  // (queue, count) over the whole dispatch
  size_t total = 0;
  for (const neff::Kernel* k : kernels) total += size_t(k->instructions_size());
  entries.reserve(total);
  // Kernel boundaries: only a dispatch of several kernels has any. Every
  // instruction's footprint, flat: instruction n of the dispatch (in kernel
  // order) has accesses [footprint_start[n], footprint_start[n + 1]).
  const bool cross = exe != nullptr && kernels.size() > 1;
  std::vector<Access> accesses, scratch;
  std::vector<size_t> footprint_start(1, 0);
  // Per queue, its last writer and reader of every byte among the dispatch's
  // earlier kernels, as semaphore counts.
  BoundaryAccesses history;
  if (cross) {
    footprint_start.reserve(total + 1);
    for (size_t j = 0; j < kernels.size(); ++j) {
      for (const Instruction& inst : kernels[j]->instructions()) {
        Footprint(inst, *exe, &scratch);
        accesses.insert(accesses.end(), scratch.begin(), scratch.end());
        footprint_start.push_back(accesses.size());
        // The last kernel's accesses are never recorded.
        if (j + 1 < kernels.size())
          for (const Access& a : scratch) history.Declare(neff::QueueIndex(inst.engine(), inst.queue()), a.lo, a.hi);
      }
    }
    history.Build();
  }
  std::vector<uint32_t> base(Q);
  for (size_t j = 0, n0 = 0; j < kernels.size(); n0 += size_t(kernels[j]->instructions_size()), ++j) {
    const neff::Kernel& k = *kernels[j];
    for (uint32_t q = 0; q < Q; ++q) base[q] = uint32_t(queue[q].size());
    for (int i = 0; i < k.instructions_size(); ++i) {
      const Instruction& inst = k.instructions(i);
      const uint32_t q = neff::QueueIndex(inst.engine(), inst.queue());
      Entry e{uint32_t(first_kernel + int(j)), uint32_t(i), uint32_t(waits.size()), 0};
      for (const neff::Wait& w : inst.waits())
        if (w.count() > 0) waits.push_back({w.queue(), base[w.queue()] + w.count()});
      if (cross && j > 0) {
        // The last instruction of each other queue, in an earlier kernel, that
        // wrote any of these bytes or, where this one writes, read them.
        QueueCounts need{};
        const size_t n = n0 + size_t(i);
        for (size_t x = footprint_start[n]; x < footprint_start[n + 1]; ++x)
          history.Conflicts(accesses[x].lo, accesses[x].hi, accesses[x].write, &need);
        for (uint32_t r = 0; r < Q; ++r)
          if (r != q && need[r] > 0) waits.push_back({r, need[r]});
      }
      e.wait_count = uint32_t(waits.size()) - e.first_wait;
      queue[q].push_back(uint32_t(entries.size()));
      entries.push_back(e);
    }
    // This kernel's accesses become visible to the next kernels only now:
    // its own instructions are ordered by its own semaphores.
    if (cross && j + 1 < kernels.size()) {
      std::vector<uint32_t> position(base);
      for (int i = 0; i < k.instructions_size(); ++i) {
        const Instruction& inst = k.instructions(i);
        const uint32_t q = neff::QueueIndex(inst.engine(), inst.queue());
        const uint32_t count = ++position[q];
        const size_t n = n0 + size_t(i);
        for (size_t x = footprint_start[n]; x < footprint_start[n + 1]; ++x)
          history.Record(q, accesses[x].lo, accesses[x].hi, accesses[x].write, count);
      }
    }
  }

  DispatchSchedule sched;
  sched.first_kernel = first_kernel;
  sched.kernels.resize(kernels.size());
  sched.launch_overhead_ps =
      uint64_t(std::llround(device.dispatch_overhead_ns * double(neff::kTicksPerNanosecond)));
  sched.order.reserve(entries.size());
  // ends[q][c-1]: when queue q's semaphore reached c.
  std::vector<std::vector<uint64_t>> ends(Q);
  std::vector<size_t> next(Q, 0);
  std::vector<uint64_t> free_at(Q, 0);
  // Queue heads whose waits are all met, by (start, queue): the earliest
  // start runs next, ties going to the lower queue index. A head that waits
  // for a count not reached yet is parked on that queue until it is.
  using Ready = std::pair<uint64_t, uint32_t>;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> ready;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> parked(Q);  // (queue, count it needs)
  auto try_head = [&](uint32_t q) {
    if (next[q] == queue[q].size()) return;
    const Entry& e = entries[queue[q][next[q]]];
    uint64_t start = free_at[q];
    for (uint32_t w = e.first_wait; w < e.first_wait + e.wait_count; ++w) {
      const auto [wq, count] = waits[w];
      if (ends[wq].size() < count) {
        parked[wq].push_back({q, count});
        return;
      }
      start = std::max(start, ends[wq][count - 1]);
    }
    ready.push({start, q});
  };
  for (uint32_t q = 0; q < Q; ++q) try_head(q);
  for (size_t remaining = entries.size(); remaining > 0; --remaining) {
    if (ready.empty())
      return absl::InternalError(absl::StrCat("kernel '", kernels.front()->name(), "'",
                                              kernels.size() > 1 ? " and the kernels after it" : "",
                                              ": semaphore waits deadlock"));
    const auto [best_start, best_q] = ready.top();
    ready.pop();
    const Entry& e = entries[queue[best_q][next[best_q]++]];
    const size_t local = size_t(e.kernel) - size_t(first_kernel);
    const Instruction& inst = kernels[local]->instructions(int(e.instruction));
    uint64_t end = best_start + neff::InstructionCostPs(inst, device, exe);
    ends[best_q].push_back(end);
    free_at[best_q] = end;
    sched.makespan_ps = std::max(sched.makespan_ps, end);
    KernelExtent& x = sched.kernels[local];
    if (x.instruction_count++ == 0) x.start = best_start;
    x.end = std::max(x.end, end);
    sched.order.push_back({e.kernel, e.instruction, best_q, best_start, end});
    try_head(best_q);
    // Heads parked on this queue whose count is now reached try again.
    std::vector<std::pair<uint32_t, uint32_t>>& waiting = parked[best_q];
    for (size_t i = 0; i < waiting.size();) {
      if (waiting[i].second <= ends[best_q].size()) {
        const uint32_t q = waiting[i].first;
        waiting[i] = waiting.back();
        waiting.pop_back();
        try_head(q);
      } else {
        ++i;
      }
    }
  }
  return sched;
}

}  // namespace

absl::StatusOr<DispatchSchedule> ScheduleDispatch(const neff::Executable& exe, int first, int count,
                                                  const neff::DeviceParams& device) {
  std::vector<const neff::Kernel*> kernels;
  for (int k = first; k < first + count; ++k) kernels.push_back(&exe.kernels(k));
  return Simulate(kernels, first, &exe, device);
}

absl::StatusOr<DispatchSchedule> ScheduleKernel(const neff::Kernel& kernel, const neff::DeviceParams& device,
                                                const neff::Executable* exe) {
  return Simulate({&kernel}, 0, exe, device);
}

absl::StatusOr<std::vector<DispatchSchedule>> ScheduleExecutable(const neff::Executable& exe,
                                                                 const neff::DeviceParams& device) {
  std::vector<DispatchSchedule> out;
  for (const neff::KernelRange& r : neff::Dispatches(exe)) {
    absl::StatusOr<DispatchSchedule> s = ScheduleDispatch(exe, r.first, r.count, device);
    if (!s.ok()) return s.status();
    out.push_back(std::move(*s));
  }
  return out;
}

}  // namespace neuroncc::rt
