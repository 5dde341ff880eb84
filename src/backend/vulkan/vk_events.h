// The device side of kiln::VulkanEvent (internal; vk_events.cpp).
#pragma once

namespace kiln::vulkan {

int event_create();
void event_destroy(int slot);
void event_record(int slot, int stream);
void event_wait(int slot, int stream);
bool event_query(int slot);
void event_synchronize(int slot);
double event_elapsed_ms(int start, int end);

}  // namespace kiln::vulkan
