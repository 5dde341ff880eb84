// The process-wide default pool as shared ownership (internal to core): contexts hold
// it, so set_num_threads can replace it while ops still run on the old one.
#pragma once

#include <memory>

#include "kiln/thread_pool.h"

namespace kiln {

std::shared_ptr<ThreadPool> default_pool_shared();

}  // namespace kiln
