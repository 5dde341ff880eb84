// The Vulkan device: the probe, host <-> device copies, device copies and casts against
// the CPU's (bit for bit), memory statistics, batching, and bad input. Runs on lavapipe
// on any machine with mesa-vulkan-drivers; skipped with the reason elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/nn.h"
#include "test_util.h"
#include "vulkan_test_util.h"

namespace kiln {
namespace {

using testing::expect_error;
using testing::expect_same_bits;
using VulkanDevice = testing::VulkanTest;

// A CPU tensor of every dtype with varied bits (random bytes: every code of narrow
// formats, NaNs and subnormals included).
Tensor random_bits(const Shape& sizes, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Tensor t = empty(sizes, dtype);
  // Bool bytes other than 0 and 1 are not bools (a CPU copy may normalise them).
  const Tensor bytes = randint(0, dtype == DType::Bool ? 2 : 256, {static_cast<int64_t>(t.nbytes())}, DType::UInt8, &gen);
  if (t.nbytes() > 0) std::memcpy(t.data_ptr(), bytes.data_ptr(), t.nbytes());
  return t;
}

const DType kAllDTypes[] = {DType::Bool,    DType::UInt8,     DType::UInt16,        DType::UInt32,
                            DType::UInt64,  DType::Int8,      DType::Int16,         DType::Int32,
                            DType::Int64,   DType::Float16,   DType::BFloat16,      DType::Float32,
                            DType::Float64, DType::Complex64, DType::Complex128,    DType::Float8_e4m3fn,
                            DType::Float8_e5m2};
const DType kFloatStorage[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float8_e4m3fn,
                               DType::Float8_e5m2};

TEST(VulkanProbe, ReportsWhyOrWhat) {
  const VulkanAvailability a = vulkan_availability();
  EXPECT_FALSE(a.reason.empty());
  if (a.usable) {
    ASSERT_GE(a.selected, 0);
    ASSERT_LT(a.selected, static_cast<int>(a.devices.size()));
    const VulkanDeviceInfo& d = a.devices[a.selected];
    EXPECT_TRUE(d.missing.empty());
    EXPECT_GE(d.max_push_constants_bytes, 128u);
    EXPECT_GT(d.max_storage_buffer_range, 0u);
    EXPECT_GT(d.subgroup_size, 0u);
  } else {
    EXPECT_EQ(a.selected, -1);
  }
}

TEST_F(VulkanDevice, RoundTripEveryDTypeAndSize) {
  for (DType dt : kAllDTypes) {
    for (int64_t n : {0, 1, 7, 255, 256, 257, 3001}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      const Tensor host = random_bits({n}, dt, 17 + n);
      const Tensor dev = host.to(kVulkan);
      EXPECT_EQ(dev.device(), kVulkan);
      EXPECT_EQ(dev.to(kCPU).device(), kCPU);
      expect_same_bits(dev, host);
    }
  }
}

TEST_F(VulkanDevice, CloneOfStridedAndBroadcastViewsMatchesCpu) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor host = random_bits({5, 9, 13}, dt, 3);
    const Tensor dev = host.to(kVulkan);
    expect_same_bits(dev.transpose(0, 2).contiguous(), host.transpose(0, 2).contiguous());
    expect_same_bits(dev.slice(1, 1, 8, 3).clone(), host.slice(1, 1, 8, 3).clone());
    expect_same_bits(dev.select(2, 4).clone(), host.select(2, 4).clone());
    expect_same_bits(dev.narrow(2, 1, 1).expand({5, 9, 7}).clone(), host.narrow(2, 1, 1).expand({5, 9, 7}).clone());
    // A non-contiguous view moved to the host comes back in its logical order.
    expect_same_bits(dev.permute({1, 0, 2}), host.permute({1, 0, 2}).contiguous());
  }
}

TEST_F(VulkanDevice, FloatCastsMatchCpuBitForBit) {
  // Every 16-bit and 8-bit code (NaNs, infinities, subnormals) plus random float32 bits
  // and values at the rounding ties of every narrow format.
  Tensor codes16 = arange(Scalar(int64_t{0}), Scalar(int64_t{65536}), Scalar(int64_t{1}), DType::Int32).to(DType::UInt16);
  Tensor codes8 = arange(Scalar(int64_t{0}), Scalar(int64_t{256}), Scalar(int64_t{1}), DType::Int32).to(DType::UInt8);
  std::vector<Tensor> sources;
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor t = empty({65536}, dt);
    std::memcpy(t.data_ptr(), codes16.data_ptr(), t.nbytes());
    sources.push_back(t);
  }
  for (DType dt : {DType::Float8_e4m3fn, DType::Float8_e5m2}) {
    Tensor t = empty({256}, dt);
    std::memcpy(t.data_ptr(), codes8.data_ptr(), t.nbytes());
    sources.push_back(t);
  }
  sources.push_back(random_bits({4099}, DType::Float32, 5));
  // Float32 values that decode exactly from every 16-bit code and sit halfway between
  // neighbours, so every rounding tie of the 16- and 8-bit formats is taken.
  const Tensor widened = sources[0].to(DType::Float32);
  Tensor ties = empty({65535}, DType::Float32);
  const Tensor halves = sources[1].to(DType::Float32);
  for (int64_t i = 0; i < 65535; ++i) {
    const float a = halves.data<float>()[i], b = halves.data<float>()[i + 1];
    ties.data<float>()[i] = static_cast<float>((static_cast<double>(a) + b) / 2);
  }
  sources.push_back(ties);
  sources.push_back(widened);
  for (const Tensor& src : sources) {
    const Tensor dev = src.to(kVulkan);
    for (DType to : kFloatStorage) {
      SCOPED_TRACE(std::string(dtype_name(src.dtype())) + " -> " + std::string(dtype_name(to)));
      expect_same_bits(dev.to(to), src.to(to));
    }
  }
}

TEST_F(VulkanDevice, StridedCastMatchesCpu) {
  const Tensor host = randn({6, 33, 5}, DType::Float32);
  const Tensor dev = host.to(kVulkan);
  for (DType to : kFloatStorage) {
    SCOPED_TRACE(dtype_name(to));
    Tensor out = empty({33, 6}, to).to(kVulkan);
    out.copy_(dev.select(2, 3).t());
    expect_same_bits(out, host.select(2, 3).t().to(to));
  }
}

TEST_F(VulkanDevice, FillCopyAcrossDevicesAndItem) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Int64, DType::Bool, DType::Float8_e4m3fn}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor dev = empty({3, 70}, dt).to(kVulkan);
    dev.fill_(Scalar(1.75));
    expect_same_bits(dev, full({3, 70}, Scalar(1.75), dt));
    dev.select(0, 1).fill_(Scalar(int64_t{-3}));
    Tensor want = full({3, 70}, Scalar(1.75), dt);
    want.select(0, 1).fill_(Scalar(int64_t{-3}));
    expect_same_bits(dev, want);
    EXPECT_EQ(dev.at({1, 69}).to_double(), want.at({1, 69}).to_double());
    EXPECT_EQ(dev.select(0, 2).select(0, 5).item().to_double(), want.at({2, 5}).to_double());
  }
  // copy_ from the device into a CPU tensor, converting.
  const Tensor src = randn({40}, DType::Float32);
  Tensor host = empty({40}, DType::BFloat16);
  host.copy_(src.to(kVulkan));
  EXPECT_EQ(testing::tensor_bytes(host), testing::tensor_bytes(src.to(DType::BFloat16)));
  EXPECT_NE(src.to(kVulkan).str().find("device=vulkan:0"), std::string::npos);
}

TEST_F(VulkanDevice, ManyCommandsBatchWithoutWaitingAndStayOrdered) {
  // 200 dependent copies (more than a dozen batches): each reads the previous result.
  Tensor a = arange(Scalar(int64_t{0}), Scalar(int64_t{1000}), Scalar(int64_t{1}), DType::Float32).to(kVulkan);
  Tensor b = empty({1000}, DType::Float32).to(kVulkan);
  for (int i = 0; i < 100; ++i) {
    b.copy_(a);
    a.copy_(b.to(DType::BFloat16));
  }
  expect_same_bits(a, arange(Scalar(int64_t{0}), Scalar(int64_t{1000}), Scalar(int64_t{1}), DType::Float32)
                          .to(DType::BFloat16)
                          .to(DType::Float32));
}

TEST_F(VulkanDevice, MemoryStatisticsAndCacheReuse) {
  vulkan_synchronize();
  const AllocatorStats before = vulkan_memory_stats();
  {
    const Tensor t = empty({1 << 20}, DType::Float32).to(kVulkan);  // 4 MiB: a chunk of its own
    const Tensor s = empty({1000}, DType::Float32).to(kVulkan);
    const AllocatorStats during = vulkan_memory_stats();
    EXPECT_GE(during.allocated_bytes - before.allocated_bytes, (int64_t{4} << 20) + 4000);
    EXPECT_GE(during.peak_allocated_bytes, during.allocated_bytes);
    EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
  }
  const AllocatorStats after = vulkan_memory_stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  {
    const Tensor again = empty({1 << 20}, DType::Float32).to(kVulkan);
    EXPECT_GT(vulkan_memory_stats().num_cache_hits, after.num_cache_hits);
  }
  vulkan_empty_cache();
  EXPECT_LE(vulkan_memory_stats().reserved_bytes, after.reserved_bytes);
  vulkan_reset_peak_memory_stats();
  EXPECT_EQ(vulkan_memory_stats().peak_allocated_bytes, vulkan_memory_stats().allocated_bytes);
}

// A chunk given back to the device gives its address range back too: making and
// freeing big tensors forever must not run the reserved range dry.
TEST_F(VulkanDevice, FreedChunksReuseTheirAddresses) {
  const void* first = nullptr;
  for (int i = 0; i < 3; ++i) {
    {
      const Tensor big = Tensor::empty({(8 << 20) / 4}, DType::Float32, kVulkan);  // 8 MiB: a chunk of its own
      if (i == 0) first = big.data_ptr();
      EXPECT_EQ(big.data_ptr(), first) << "round " << i;
    }
    vulkan_empty_cache();
  }
}

TEST_F(VulkanDevice, CopyAcrossDevicesCountsOneWrite) {
  Tensor d = Tensor::empty({8}, DType::Float32, kVulkan);
  const int64_t before = d.version();
  d.copy_(arange(Scalar(int64_t{0}), Scalar(int64_t{8}), Scalar(int64_t{1}), DType::Float32));
  EXPECT_EQ(d.version(), before + 1);
  Tensor h = empty({8}, DType::Float32);
  const int64_t host_before = h.version();
  h.copy_(d);
  EXPECT_EQ(h.version(), host_before + 1);
  EXPECT_EQ(h.data<float>()[7], 7.0f);
}

TEST_F(VulkanDevice, BadInputIsAClearError) {
  expect_error([] { empty({4}, DType::Float32).to(Device{DeviceType::Vulkan, 1}); }, ErrorKind::Runtime,
               "vulkan:1 does not exist");
  const Tensor dev = empty({4}, DType::Int32).to(kVulkan);
  expect_error([&] { (void)dev.to(DType::Float32); }, ErrorKind::NotImplemented,
               "converting int32 to float32 on vulkan is not implemented yet");
}

TEST_F(VulkanDevice, EventsMarkCompletionAndTimeTheDevice) {
  VulkanEvent start(true), end(true);
  EXPECT_TRUE(start.query());  // not recorded: nothing to wait for, as in PyTorch
  expect_error([&] { (void)start.elapsed_time(end); }, ErrorKind::Runtime, "must be recorded");
  Tensor a = randn({256, 256}).to(kVulkan);
  start.record();
  Tensor b = empty({256, 256}, DType::Float32).to(kVulkan);
  for (int i = 0; i < 40; ++i) b.copy_(a.t());
  end.record();
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_TRUE(start.query());
  const double ms = start.elapsed_time(end);
  EXPECT_GT(ms, 0.0);
  EXPECT_LT(ms, 600000.0);
  // Re-recording moves the event: it is pending again until the device passes it.
  end.record();
  end.synchronize();
  EXPECT_GE(start.elapsed_time(end), ms);
  VulkanEvent untimed;
  untimed.record();
  untimed.synchronize();
  EXPECT_TRUE(untimed.query());
  expect_error([&] { (void)untimed.elapsed_time(end); }, ErrorKind::Runtime, "enable_timing=True");
}

TEST_F(VulkanDevice, StreamsComeFromAPoolAndGuardsSetTheCurrentOne) {
  EXPECT_EQ(VulkanStream::current(), VulkanStream::default_stream());
  EXPECT_EQ(VulkanStream::default_stream().id(), 0);
  const VulkanStream s = VulkanStream::create(), t = VulkanStream::create();
  EXPECT_GE(s.id(), 1);
  EXPECT_LT(s.id(), VulkanStream::kPoolSize);
  EXPECT_NE(s, t);
  {
    VulkanStreamGuard outer(s);
    EXPECT_EQ(VulkanStream::current(), s);
    {
      VulkanStreamGuard inner(t);
      EXPECT_EQ(VulkanStream::current(), t);
    }
    EXPECT_EQ(VulkanStream::current(), s);
  }
  EXPECT_EQ(VulkanStream::current(), VulkanStream::default_stream());
}

// A producer on a side stream, a consumer on the default stream ordered by an event:
// the consumer sees the producer's result, and each stream's query and synchronize see
// its own work.
TEST_F(VulkanDevice, EventsOrderWorkAcrossStreams) {
  const Tensor x = randn({4096}).to(kVulkan);
  const VulkanStream side = VulkanStream::create();
  Tensor y;
  VulkanEvent produced;
  // x's upload is queued on the default stream: the side stream must wait for it (as
  // with PyTorch's streams, nothing orders two streams but events).
  side.wait_stream(VulkanStream::current());
  {
    VulkanStreamGuard on_side(side);
    y = mul(x, Scalar(3.0));
    for (int i = 0; i < 20; ++i) y = add(y, Scalar(1.0));
    produced.record();
  }
  produced.wait();  // the default stream waits, on the device
  const Tensor z = sub(y, Scalar(20.0));
  const Tensor expected = mul(x.to(kCPU), Scalar(3.0));
  const Tensor got = z.to(kCPU);
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_NEAR(got.data<float>()[i], expected.data<float>()[i], 1e-4);
  side.synchronize();
  EXPECT_TRUE(side.query());
  EXPECT_TRUE(produced.query());
  // wait_stream is an event on the other stream's current end.
  const VulkanStream other = VulkanStream::create();
  other.wait_stream(VulkanStream::current());
  {
    VulkanStreamGuard on_other(other);
    y = add(y, Scalar(1.0));
  }
  VulkanStream::default_stream().wait_stream(other);
  EXPECT_NEAR(sub(y, z).to(kCPU).data<float>()[0], 21.0, 1e-4);
}

// Blocks go back to the stream they were allocated for; one that another stream also
// used (record_stream) is reused only once that stream's work has run.
TEST_F(VulkanDevice, RecordStreamDelaysReuseUntilTheOtherStreamIsDone) {
  const VulkanStream side = VulkanStream::create();
  const int64_t n = (6 << 20) / 4;  // a chunk of its own: the address says which block
  const void* first = nullptr;
  {
    const Tensor t = Tensor::empty({n}, DType::Float32, kVulkan);
    first = t.data_ptr();
  }
  {
    // A block freed by the default stream is not handed to another stream.
    VulkanStreamGuard on_side(side);
    const Tensor u = Tensor::empty({n}, DType::Float32, kVulkan);
    EXPECT_NE(u.data_ptr(), first);
  }
  {
    const Tensor again = Tensor::empty({n}, DType::Float32, kVulkan);
    ASSERT_EQ(again.data_ptr(), first);  // the default stream's own cached block
    {
      VulkanStreamGuard on_side(side);
      (void)mul(again.view({n}), Scalar(2.0));
    }
    vulkan_record_stream(again, side);
  }
  side.synchronize();
  const Tensor later = Tensor::empty({n}, DType::Float32, kVulkan);
  EXPECT_EQ(later.data_ptr(), first);  // the side stream finished: the block is back
  expect_error([] { vulkan_record_stream(empty({2}), VulkanStream::default_stream()); }, ErrorKind::Runtime,
               "expected a tensor on vulkan:0");
}

TEST_F(VulkanDevice, KernelsAreSubmittedInBatchesAndTheHostWaitsOnlyToRead) {
  Tensor a = randn({1000}).to(kVulkan);
  const Tensor b = randn({1000}).to(kVulkan);
  vulkan_synchronize();
  const VulkanQueueStats before = vulkan_queue_stats();
  ASSERT_GT(before.batch_size, 0);
  constexpr int kOps = 40;
  for (int i = 0; i < kOps; ++i) a = add(a, b);
  const VulkanQueueStats queued = vulkan_queue_stats();
  EXPECT_EQ(queued.commands - before.commands, kOps);
  EXPECT_LE(queued.submits - before.submits, kOps / queued.batch_size);
  EXPECT_EQ(queued.waits, before.waits);  // nothing read yet: no wait
  (void)a.to(kCPU);
  const VulkanQueueStats read = vulkan_queue_stats();
  EXPECT_EQ(read.waits - before.waits, 1);
  EXPECT_LE(read.submits - before.submits, kOps / queued.batch_size + 1);
}

TEST_F(VulkanDevice, SiluAndMulMatchesCpu) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = randn({3, 2 * 129}).to(dt);
    const Tensor want = silu_and_mul(x);
    const Tensor got = silu_and_mul(x.to(kVulkan));
    // exp (3 + 2|x| ulp, |x| < 6 here) through sigmoid, two products: 32 ulp, plus the
    // result's rounding.
    const double rtol = 32 * std::numeric_limits<float>::epsilon() +
                        (dt == DType::Float32 ? 0 : dt == DType::BFloat16 ? 1.0 / 128 : 1.0 / 1024);
    testing::expect_close(got, want, rtol, 1e-6);
  }
}

TEST(VulkanDeviceNames, ParseLikePyTorch) {
  EXPECT_EQ(device_from_string("vulkan"), kVulkan);
  EXPECT_EQ(device_from_string("vulkan:0"), kVulkan);
  EXPECT_EQ(device_from_string("cpu"), kCPU);
  EXPECT_EQ(kVulkan.str(), "vulkan:0");
  expect_error([] { device_from_string("metal"); }, ErrorKind::Runtime, "Expected one of cpu, cuda, vulkan");
  expect_error([] { device_from_string("vulkan:x"); }, ErrorKind::Runtime, "Invalid device string: 'vulkan:x'");
}

}  // namespace
}  // namespace kiln
