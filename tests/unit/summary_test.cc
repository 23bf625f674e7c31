// neuron-profile's summary: ATen attribution and totals on hand-built traces.
#include "summary.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "json.h"

#include "device_model.h"
#include "executor.h"
#include "ntff_format.h"
#include "profile.h"
#include "test_neffs.h"

namespace neuroncc::profile {
namespace {

// One kernel per entry of `ops_per_kernel`, each dispatched `executions`
// times: 100 ticks of launch, then instructions described by `insts`
// (queue, duration, source_op), run back to back.
struct Inst {
  uint32_t queue;
  uint64_t duration;
  int32_t source_op;
};

ntff::Profile Trace(const std::vector<std::vector<std::string>>& ops_per_kernel,
                    const std::vector<std::vector<Inst>>& insts, uint32_t executions) {
  ntff::Profile p;
  p.set_format_version(ntff::kNtffFormatVersion);
  p.set_ticks_per_nanosec(1000);
  p.set_neff_name("t");
  p.set_execution_count(executions);
  for (size_t k = 0; k < ops_per_kernel.size(); ++k) {
    ntff::KernelInfo* info = p.add_kernel_info();
    info->set_name("k" + std::to_string(k));
    for (const std::string& op : ops_per_kernel[k]) info->add_source_ops(op);
  }
  uint64_t t = 0;
  for (uint32_t e = 0; e < executions; ++e) {
    for (size_t k = 0; k < ops_per_kernel.size(); ++k) {
      uint32_t span = uint32_t(p.kernel_spans_size());
      ntff::DispatchSpan* d = p.add_dispatch_spans();
      d->set_execution(e);
      d->set_start(t);
      d->set_first_kernel_span(span);
      d->set_kernel_span_count(1);
      ntff::KernelSpan* s = p.add_kernel_spans();
      s->set_kernel(uint32_t(k));
      s->set_execution(e);
      s->set_dispatch(uint32_t(p.dispatch_spans_size() - 1));
      t += 100;
      d->set_launch_end(t);
      s->set_start(t);
      for (const Inst& i : insts[k]) {
        ntff::InstructionEvent* ev = p.add_instructions();
        ev->set_span(span);
        ev->set_queue(i.queue);
        ev->set_opcode(i.queue < 4 ? neff::TENSOR_TENSOR : neff::DMA_LOAD);
        ev->set_start(t);
        ev->set_end(t + i.duration);
        ev->set_source_op(i.source_op);
        if (i.queue >= 4) {
          ev->set_bytes(64);
          ntff::DmaEvent* d = p.add_dma();
          d->set_span(span);
          d->set_bytes(64);
          d->set_start(t);
          d->set_end(t + i.duration);
        }
        t += i.duration;
      }
      s->set_instruction_count(insts[k].size());
      s->set_end(t);
      d->set_end(t);
    }
  }
  p.set_total_ticks(t);
  // Everything the summary reads must be a valid trace.
  EXPECT_TRUE(ntff::ParseNtff(ntff::SerializeNtff(p)).ok());
  return p;
}

const NamedRow* Op(const Summary& s, const std::string& name) {
  for (const NamedRow& r : s.aten_ops)
    if (r.name == name) return &r;
  return nullptr;
}

TEST(ProfileSummary, SplitsFusedKernelsByTaggedBusyTime) {
  // Kernel: launch 100, a (tagged 0) 300, b (tagged 1) 100, untagged DMA 200.
  ntff::Profile p = Trace({{"aten.mul.Tensor", "aten.add.Tensor"}},
                          {{{1, 300, 0}, {2, 100, 1}, {4, 200, -1}}}, 1);
  Summary s = Summarize(p);
  ASSERT_EQ(s.total_ps, 700u);
  // Launch and untagged time spread 3:1 like the tagged time.
  EXPECT_DOUBLE_EQ(Op(s, "aten.mul.Tensor")->device_time_ps, 525.0);
  EXPECT_DOUBLE_EQ(Op(s, "aten.add.Tensor")->device_time_ps, 175.0);
  EXPECT_EQ(s.aten_ops[0].name, "aten.mul.Tensor");  // by time, descending
  EXPECT_EQ(s.engine_busy_ps[1], 300u);
  EXPECT_EQ(s.engine_busy_ps[2], 100u);
  EXPECT_EQ(s.dma_busy_ps, 200u);
  EXPECT_EQ(s.dma_transfer_count, 1u);
  EXPECT_EQ(s.hbm_read_bytes, 64u);
  EXPECT_EQ(s.launch_overhead_ps, 100u);
}

TEST(ProfileSummary, SingleOpKernelsTakeEverythingAndCallsCount) {
  ntff::Profile p = Trace({{"aten.mul.Tensor"}, {"aten.mul.Tensor"}, {}},
                          {{{1, 50, -1}}, {{1, 70, 0}}, {{2, 10, -1}}}, 2);
  Summary s = Summarize(p);
  EXPECT_EQ(s.dispatch_count, 6u);
  EXPECT_EQ(s.kernels_per_execution, 3u);
  EXPECT_EQ(Op(s, "aten.mul.Tensor")->calls, 4u);
  EXPECT_DOUBLE_EQ(Op(s, "aten.mul.Tensor")->device_time_ps, 2 * (150.0 + 170.0));
  ASSERT_NE(Op(s, "(no source op)"), nullptr);
  EXPECT_DOUBLE_EQ(Op(s, "(no source op)")->device_time_ps, 2 * 110.0);
  double sum = 0;
  for (const NamedRow& r : s.aten_ops) sum += r.device_time_ps;
  EXPECT_DOUBLE_EQ(sum, double(s.total_ps));
  ASSERT_EQ(s.kernels.size(), 3u);
  EXPECT_EQ(s.kernels[1].calls, 2u);
  EXPECT_EQ(s.kernels[1].device_time_ps, 340u);
}

TEST(ProfileSummary, UntaggedMultiOpKernelsSplitEqually) {
  ntff::Profile p = Trace({{"a", "b", "a"}}, {{{1, 200, -1}}}, 1);
  Summary s = Summarize(p);
  EXPECT_DOUBLE_EQ(Op(s, "a")->device_time_ps, 200.0);
  EXPECT_DOUBLE_EQ(Op(s, "b")->device_time_ps, 100.0);
  EXPECT_EQ(Op(s, "a")->calls, 2u);
  std::string text = RenderText(s);
  EXPECT_NE(text.find("Self Device Time total: 0.000 us"), std::string::npos) << text;
  std::string json = RenderSummaryJson(s);
  EXPECT_NE(json.find("\"aten_ops\""), std::string::npos);
}

TEST(ProfileSummary, MatmulsCountTheirFlopsOnTheTensorEngine) {
  // Hand-built: a 1000-tick matmul of 2 * 64 * 32 * 100 FLOPs on the tensor
  // queue, then a 500-tick vector op over 320 elements.
  ntff::Profile p = Trace({{"aten.mm"}}, {{{0, 1000, 0}, {1, 500, 0}}}, 1);
  ntff::FillDeviceParams(neff::Trn1(), p.mutable_device());
  p.mutable_instructions(0)->set_opcode(neff::MATMUL);
  p.mutable_instructions(0)->set_flops(2 * 64 * 32 * 100);
  p.mutable_instructions(1)->set_flops(320);
  Summary s = Summarize(p);
  EXPECT_EQ(s.matmul_count, 1u);
  EXPECT_EQ(s.tensor_engine_flops, 2u * 64 * 32 * 100);
  EXPECT_EQ(s.elementwise_ops, 320u);
  EXPECT_EQ(s.engine_busy_ps[0], 1000u);
  EXPECT_DOUBLE_EQ(s.tensor_peak_flops_per_s, 2.0 * 128 * 128 * 2.8e9);
  std::string json = RenderSummaryJson(s);
  EXPECT_NE(json.find("\"matmul_count\": 1,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"tensor_engine_flops\": 409600,"), std::string::npos) << json;
  // 1000 of 1600 ticks (100 launch + 1000 + 500).
  EXPECT_NE(json.find("\"tensor_engine_active_time_percent\": 62.5,"), std::string::npos) << json;
  // 409600 FLOPs in 1.6 ns against 91.75 TFLOPS.
  double mfu = 100.0 * 409600 / 1.6e-9 / (2.0 * 128 * 128 * 2.8e9);
  EXPECT_NE(json.find(absl::StrCat("\"mfu_estimated_percent\": ", json::Number(mfu, 4))), std::string::npos)
      << json;
  EXPECT_NE(RenderText(s).find("TensorEngine: 1 matmul, "), std::string::npos) << RenderText(s);
}

TEST(ProfileSummary, AnExecutedMatmulModelKeepsTheTensorEngineBusy) {
  using neuroncc::testing::MatmulModel;
  neff::Executable exe = MatmulModel(64, 256, 512, neff::BF16, 2);
  absl::StatusOr<neff::Neff> neff = neff::ParseNeff(neuroncc::testing::Serialize(exe));
  ASSERT_TRUE(neff.ok()) << neff.status();
  auto ex = rt::Executor::Create(*neff, neff::Trn1());
  ASSERT_TRUE(ex.ok());
  ntff::Profile p = rt::NewProfile(*neff, neff::Trn1());
  rt::AppendExecution(*neff, (*ex)->schedules(), &p);
  Summary s = Summarize(p);
  EXPECT_EQ(s.matmul_count, 2u);
  EXPECT_EQ(s.tensor_engine_flops, 2u * 2 * 128 * 64 * 512);  // two K tiles of 128
  // Two transposes and two matmuls on the tensor queue.
  const neff::Kernel& k = exe.kernels(0);
  uint64_t tensor_ps = 0;
  for (int i = 3; i <= 8; ++i)
    if (i < 5 || i > 6) tensor_ps += neff::InstructionCostPs(k.instructions(i), neff::Trn1());
  EXPECT_EQ(s.engine_busy_ps[0], tensor_ps);
  // Transposes count as elements moved, not as matmul FLOPs.
  uint64_t elementwise = 0;
  for (const neff::Instruction& i : k.instructions())
    if (i.opcode() == neff::TRANSPOSE || i.opcode() == neff::TENSOR_SCALAR)
      elementwise += uint64_t(i.in0().partitions()) * i.in0().num_elements();
  EXPECT_EQ(s.elementwise_ops, elementwise);
}

TEST(ProfileSummary, GathersAreDmaReadsOfTheirRowsAndIndices) {
  // EmbeddingModel: a gather of 128 bf16 rows of 64 with int32 ids, a store.
  neff::Executable exe = neuroncc::testing::EmbeddingModel(1000, 64, 128, neff::BF16, neff::I32);
  absl::StatusOr<neff::Neff> neff = neff::ParseNeff(neuroncc::testing::Serialize(exe));
  ASSERT_TRUE(neff.ok()) << neff.status();
  auto ex = rt::Executor::Create(*neff, neff::Trn1());
  ASSERT_TRUE(ex.ok());
  ntff::Profile p = rt::NewProfile(*neff, neff::Trn1());
  rt::AppendExecution(*neff, (*ex)->schedules(), &p);
  rt::AppendExecution(*neff, (*ex)->schedules(), &p);
  ASSERT_TRUE(ntff::ParseNtff(ntff::SerializeNtff(p)).ok());  // DMA events match DMA instructions
  Summary s = Summarize(p);
  EXPECT_EQ(s.dma_transfer_count, 4u);
  EXPECT_EQ(s.hbm_read_bytes, 2u * (128 * 64 * 2 + 128 * 4));
  EXPECT_EQ(s.hbm_write_bytes, 2u * 128 * 64 * 2);
  EXPECT_EQ(s.kernels[0].hbm_read_bytes, s.hbm_read_bytes);
  EXPECT_EQ(s.hbm_read_bytes, 2 * (*ex)->stats().hbm_read_bytes);  // as nrt_get_last_execution_stats
  // The gather's time: the DMA cost with the int32 index read.
  uint64_t gather_ps = neff::InstructionCostPs(exe.kernels(0).instructions(0), neff::Trn1(), &exe);
  EXPECT_EQ(p.instructions(0).end() - p.instructions(0).start(), gather_ps);
  EXPECT_NE(RenderEventsJson(p).find("\"opcode\": \"dma_gather\""), std::string::npos);
  EXPECT_NE(RenderEventsJson(p).find("\"direction\": \"hbm_to_sbuf\", \"tensor\": 0, \"bytes\": 16896"),
            std::string::npos)
      << RenderEventsJson(p);
  EXPECT_NE(RenderPerfetto(p).find("{\"name\":\"dma_gather\""), std::string::npos);
}

TEST(ProfileSummary, OverlappingKernelsOfOneDispatchShareItsTime) {
  // One dispatch: launch [0, 100); kernel A runs [100, 300) on the vector
  // engine, kernel B [200, 400) on the scalar engine. A alone 100, both 100
  // (50 each), B alone 100: equal shares of the 400 ticks, launch included.
  ntff::Profile p;
  p.set_format_version(ntff::kNtffFormatVersion);
  p.set_ticks_per_nanosec(1000);
  p.set_execution_count(1);
  for (const char* name : {"a", "b"}) {
    ntff::KernelInfo* info = p.add_kernel_info();
    info->set_name(name);
    info->add_source_ops(std::string("aten.") + name);
  }
  ntff::DispatchSpan* d = p.add_dispatch_spans();
  d->set_start(0);
  d->set_launch_end(100);
  d->set_end(400);
  d->set_kernel_span_count(2);
  const uint64_t spans[2][2] = {{100, 300}, {200, 400}};
  for (uint32_t k = 0; k < 2; ++k) {
    ntff::KernelSpan* s = p.add_kernel_spans();
    s->set_kernel(k);
    s->set_start(spans[k][0]);
    s->set_end(spans[k][1]);
    s->set_instruction_count(1);
    ntff::InstructionEvent* e = p.add_instructions();
    e->set_span(k);
    e->set_queue(1 + k);
    e->set_opcode(neff::TENSOR_TENSOR);
    e->set_start(spans[k][0]);
    e->set_end(spans[k][1]);
    e->set_source_op(0);
  }
  p.set_total_ticks(400);
  ASSERT_TRUE(ntff::ParseNtff(ntff::SerializeNtff(p)).ok());
  Summary s = Summarize(p);
  EXPECT_EQ(s.dispatch_count, 1u);
  EXPECT_EQ(s.kernel_span_count, 2u);
  EXPECT_EQ(s.launch_overhead_ps, 100u);
  EXPECT_EQ(s.kernels[0].device_time_ps, 200u);
  EXPECT_EQ(s.kernels[1].device_time_ps, 200u);
  EXPECT_EQ(s.kernels[0].launch_overhead_ps + s.kernels[1].launch_overhead_ps, 100u);
  EXPECT_DOUBLE_EQ(Op(s, "aten.a")->device_time_ps + Op(s, "aten.b")->device_time_ps, 400.0);
  EXPECT_NE(RenderText(s).find("1 dispatch running 2 kernels"), std::string::npos) << RenderText(s);
  std::string perfetto = RenderPerfetto(p);
  EXPECT_NE(perfetto.find("\"kernels 2\""), std::string::npos);  // B overlaps A: a second track
  EXPECT_NE(RenderSummaryJson(s).find("\"kernel_executions\": 2"), std::string::npos);
}

}  // namespace
}  // namespace neuroncc::profile

TEST(JsonQuote, AnyBytesGiveValidJson) {
  using neuroncc::json::IsValidUtf8;
  using neuroncc::json::Quote;
  EXPECT_EQ(Quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(Quote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  // A stray continuation byte, a truncated sequence, an overlong '/', a
  // surrogate and a byte that never starts UTF-8 each become U+FFFD.
  EXPECT_EQ(Quote("x\x80y"), "\"x\\ufffdy\"");
  EXPECT_EQ(Quote("\xe2\x82"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(Quote("\xc0\xaf"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(Quote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
  EXPECT_EQ(Quote("\xff"), "\"\\ufffd\"");
  EXPECT_TRUE(IsValidUtf8("plain \xc3\xa9"));
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8(std::string_view("\xe0\x80\x80", 3)));
}

TEST(KernelBound, NamesWhatLimitsAKernel) {
  using neuroncc::profile::KernelBound;
  using neuroncc::profile::KernelRow;
  KernelRow k;
  k.device_time_ps = 1000000;
  k.launch_overhead_ps = 500000;  // half the time is the dispatch's fixed cost
  k.span_ps = 500000;
  EXPECT_EQ(KernelBound(k, 16, 410), "launch overhead");
  k.launch_overhead_ps = 100000;
  k.span_ps = 900000;
  k.engine_busy_ps[1] = 800000;  // vector engine 89% busy
  k.dma_queue_busy_ps = 16 * 300000;
  EXPECT_EQ(KernelBound(k, 16, 410), "compute");
  k.dma_queue_busy_ps = 16 * 850000;  // the queues 94% occupied
  EXPECT_EQ(KernelBound(k, 16, 410), "memory");
  k.dma_queue_busy_ps = 0;
  k.hbm_read_bytes = 369000;  // 369 KB in 0.9 us: 410 GB/s, the core's whole share
  EXPECT_EQ(KernelBound(k, 16, 410), "memory");
  k.hbm_read_bytes = 0;
  k.engine_busy_ps[1] = 300000;  // nothing busy half the time
  EXPECT_EQ(KernelBound(k, 16, 410), "waiting on dependencies");
}
