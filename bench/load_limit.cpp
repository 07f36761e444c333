// Checks the address-space limit (ulimit -v) before any shared library starts. OpenBLAS's
// constructor maps a buffer for each of its threads and retries a map that fails for ever, so
// under a limit too low for it every command, --help included, hung before main. This runs
// first (the executable's .preinit_array runs before every library's constructor) and ends the
// process at once with a message naming the limit, what is mapped and what OpenBLAS will map.
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// OpenBLAS's BUFFER_SIZE in Debian's x86-64 and arm64 builds (32 << 22 bytes), one per thread.
constexpr unsigned long long kOpenBlasBufferBytes = 128ull << 20;
// Room for trainbench itself past its libraries: heap, stacks, the command's own work.
constexpr unsigned long long kWorkingBytes = 256ull << 20;

unsigned long long mapped_bytes() {
  char text[128] = {};
  const int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return 0;
  const ssize_t length = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (length <= 0) return 0;
  return std::strtoull(text, nullptr, 10) * static_cast<unsigned long long>(sysconf(_SC_PAGESIZE));
}

long environment_count(const char* name) {
  const char* text = std::getenv(name);
  return text ? std::strtol(text, nullptr, 10) : 0;
}

// The variant of libopenblas.so.0 loaded (Debian installs each in a folder of its name).
int openblas_variant_callback(dl_phdr_info* info, std::size_t, void* variant) {
  if (std::strstr(info->dlpi_name, "libopenblas")) {
    const char* name = std::strstr(info->dlpi_name, "openblas-openmp")   ? "openmp"
                       : std::strstr(info->dlpi_name, "openblas-serial") ? "serial"
                                                                         : "pthread";
    *static_cast<const char**>(variant) = name;
    return 1;
  }
  return 0;
}

// The threads OpenBLAS starts with, and the variable that sets them: its OpenMP build takes
// OpenMP's count, the others their own variable first; both default to the CPUs this process
// may run on. No threads where OpenBLAS is not loaded.
struct OpenBlasThreads {
  long count = 0;
  const char* variable = "OPENBLAS_NUM_THREADS";
};

OpenBlasThreads openblas_threads() {
  const char* variant = nullptr;
  dl_iterate_phdr(openblas_variant_callback, &variant);
  if (!variant) return {};
  if (std::strcmp(variant, "serial") == 0) return {1};
  const bool openmp = std::strcmp(variant, "openmp") == 0;
  OpenBlasThreads threads{0, openmp ? "OMP_NUM_THREADS" : "OPENBLAS_NUM_THREADS"};
  if (!openmp) threads.count = environment_count("OPENBLAS_NUM_THREADS");
  if (threads.count <= 0) threads.count = environment_count("OMP_NUM_THREADS");
  if (threads.count <= 0) {
    cpu_set_t cpus;
    threads.count = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  }
  return threads;
}

void check_address_space_limit(int, char**, char**) {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  const OpenBlasThreads threads = openblas_threads();
  if (threads.count == 0) return;  // nothing here retries for ever
  const unsigned long long mapped = mapped_bytes();
  const unsigned long long needed =
      mapped + static_cast<unsigned long long>(threads.count) * kOpenBlasBufferBytes +
      kWorkingBytes;
  if (limit.rlim_cur >= needed) return;
  constexpr double kMiB = 1 << 20;
  char fewer_threads[96] = "";
  if (threads.count > 1 && limit.rlim_cur >= mapped + kOpenBlasBufferBytes + kWorkingBytes)
    std::snprintf(fewer_threads, sizeof(fewer_threads),
                  " or start OpenBLAS with fewer threads (%s=1)", threads.variable);
  char message[768];
  const int length = std::snprintf(
      message, sizeof(message),
      "trainbench: error: the address-space limit (ulimit -v) of %.0f MiB is below the %.0f MiB "
      "trainbench needs to start: %.0f MiB of libraries mapped, OpenBLAS's %.0f MiB buffer for "
      "each of its %ld threads and %.0f MiB to work in; raise the limit (ulimit -v %llu)%s\n",
      static_cast<double>(limit.rlim_cur) / kMiB, static_cast<double>(needed) / kMiB,
      static_cast<double>(mapped) / kMiB, static_cast<double>(kOpenBlasBufferBytes) / kMiB,
      threads.count, static_cast<double>(kWorkingBytes) / kMiB, (needed + 1023) / 1024,
      fewer_threads);
  if (length > 0) (void)!write(STDERR_FILENO, message, static_cast<std::size_t>(length));
  _exit(1);
}

}  // namespace

// Only the executable's .preinit_array runs before the libraries' constructors.
__attribute__((section(".preinit_array"),
               used)) void (*const trainbench_load_limit_check)(int, char**,
                                                                char**) = check_address_space_limit;
