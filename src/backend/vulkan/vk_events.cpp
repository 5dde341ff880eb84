// Events (kiln/vulkan.h VulkanEvent): each live event owns one query of a timestamp query
// pool. record() writes the device's timestamp after everything queued so far and
// submits the open batch; whether the device has passed the event is whether the query
// result is available. Installed into core with the other runtime entries (vk_runtime.cpp).
#include "backend/vulkan/vk_events.h"

#include <mutex>
#include <vector>

#include "backend/vulkan/vk_recorder.h"
#include "kiln/error.h"

namespace kiln::vulkan {
namespace {

constexpr uint32_t kMaxEvents = 1024;

class EventPool {
 public:
  explicit EventPool(Context& ctx) : ctx_(ctx) {
    KILN_CHECK(ctx.timestamp_valid_bits > 0, "Event",
               "the Vulkan device's queue has no timestamps (timestampValidBits 0), which kiln's events use");
    VkQueryPoolCreateInfo info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = kMaxEvents;
    check(vk.vkCreateQueryPool(ctx.device, &info, nullptr, &pool_), "Event", "vkCreateQueryPool");
    for (uint32_t i = kMaxEvents; i-- > 0;) free_.push_back(static_cast<int>(i));
    serial_.assign(kMaxEvents, 0);
    stream_.assign(kMaxEvents, 0);
  }

  int create() {
    std::lock_guard<std::mutex> lock(mutex_);
    KILN_CHECK(!free_.empty(), "Event", "more than {} Vulkan events are alive at once", kMaxEvents);
    const int slot = free_.back();
    free_.pop_back();
    return slot;
  }

  void destroy(int slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(slot);
  }

  // The batch is submitted at once, so a wait on the event is never submitted before
  // the signal it waits for.
  void record(int slot, int stream) {
    Recorder& r = recorder_of(stream);
    auto lock = r.lock();
    VkCommandBuffer cb = r.begin_command();
    vk.vkCmdResetQueryPool(cb, pool_, static_cast<uint32_t>(slot), 1);
    vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool_, static_cast<uint32_t>(slot));
    r.end_command();
    r.flush();
    serial_[slot] = r.last_submitted();
    stream_[slot] = stream;
  }

  // Later work of `stream` waits for the recording stream's timeline to reach the batch.
  void wait(int slot, int stream) {
    const VkSemaphore signal = recorder_of(stream_[slot]).timeline();
    Recorder& r = recorder_of(stream);
    auto lock = r.lock();
    r.wait_on(signal, serial_[slot]);
  }

  // Whether the batch holding the event's last record() has completed: a query result
  // alone could be an earlier record's, still available until the reset runs.
  bool complete(int slot) {
    Recorder& r = recorder_of(stream_[slot]);
    auto lock = r.lock();
    return r.is_complete(serial_[slot]);
  }

  void synchronize(int slot) {
    Recorder& r = recorder_of(stream_[slot]);
    auto lock = r.lock();
    if (!r.is_complete(serial_[slot])) r.wait_all();
  }

  // The timestamp, or false while the device has not reached it.
  bool timestamp(int slot, uint64_t& ticks) const {
    uint64_t data[2] = {0, 0};
    const VkResult res = vk.vkGetQueryPoolResults(ctx_.device, pool_, static_cast<uint32_t>(slot), 1, sizeof(data),
                                                  data, sizeof(data),
                                                  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WITH_AVAILABILITY_BIT);
    if (res == VK_NOT_READY || data[1] == 0) return false;
    check(res, "Event", "vkGetQueryPoolResults");
    ticks = data[0];
    return true;
  }

  double elapsed_ms(int start, int end) {
    KILN_CHECK(complete(start) && complete(end), "elapsed_time",
               "Both events must be completed before calculating elapsed time.");
    uint64_t t0 = 0, t1 = 0;
    KILN_CHECK(timestamp(start, t0) && timestamp(end, t1), "elapsed_time",
               "Both events must be completed before calculating elapsed time.");
    const uint64_t mask = ctx_.timestamp_valid_bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << ctx_.timestamp_valid_bits) - 1;
    const uint64_t ticks = (t1 - t0) & mask;
    return static_cast<double>(ticks) * ctx_.properties.limits.timestampPeriod / 1e6;
  }

 private:
  Context& ctx_;
  VkQueryPool pool_ = VK_NULL_HANDLE;
  std::mutex mutex_;
  std::vector<int> free_;
  std::vector<uint64_t> serial_;  // per slot: the batch its last record() went out in
  std::vector<int> stream_;       // per slot: the stream of that batch
};

EventPool& events() {
  static auto* pool = new EventPool(context("Event"));
  return *pool;
}

}  // namespace

int event_create() { return events().create(); }
void event_destroy(int slot) { events().destroy(slot); }
void event_record(int slot, int stream) { events().record(slot, stream); }
void event_wait(int slot, int stream) { events().wait(slot, stream); }
bool event_query(int slot) { return events().complete(slot); }
void event_synchronize(int slot) { events().synchronize(slot); }
double event_elapsed_ms(int start, int end) { return events().elapsed_ms(start, end); }

}  // namespace kiln::vulkan
