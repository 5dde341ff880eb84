#include "llm/model_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kiln/error.h"

namespace kiln::llm {
namespace {

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

[[noreturn]] void not_regular(const std::string& path, std::string_view op, mode_t mode) {
  fail(ErrorKind::Runtime, op, "{} is {}, expected a regular file", path, file_type_name(mode));
}

}  // namespace

bool regular_file_exists(const std::string& path, std::string_view op) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    fail(ErrorKind::Runtime, op, "{}: cannot examine: {}", path, std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) not_regular(path, op, st.st_mode);
  return true;
}

int open_regular_file(const std::string& path, std::string_view op, uint64_t& size) {
  // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(ErrorKind::Runtime, op, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(ErrorKind::Runtime, op, "{}: cannot examine: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    not_regular(path, op, st.st_mode);
  }
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view op) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, op, size);
  if (size > max_bytes) {
    ::close(fd);
    fail(ErrorKind::Value, op, "{} is {} bytes, more than the {}-byte limit for this file", path, size, max_bytes);
  }
  std::string text(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::close(fd);
      if (n == 0) fail(ErrorKind::Runtime, op, "{}: cannot read: the file shrank while it was read", path);
      fail(ErrorKind::Runtime, op, "{}: cannot read: {}", path, std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return text;
}

}  // namespace kiln::llm
