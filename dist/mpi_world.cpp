// The World over MPI_COMM_WORLD. Host-side exchanges are non-blocking calls waited on with a
// deadline, so a rank that died or hangs ends the job with a reason instead of a silent hang.
#include <mpi.h>

#include <fmt/format.h>

#include <chrono>
#include <stdexcept>

#include "dist/mpi_communicator.h"
#include "dist/rank_watch.h"
#include "dist/world.h"

namespace tb {
namespace {

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<std::size_t>(length));
  if (const auto end = version.find_first_of(",\n"); end != std::string::npos) version.resize(end);
  return version;
}

class MpiWorld final : public World {
 public:
  MpiWorld(int* argc, char*** argv, std::chrono::seconds timeout) {
    int provided = 0;
    // Only the main thread calls MPI; OpenMP's threads never do.
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      throw std::runtime_error("MPI_Init_thread failed");
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_);
    MPI_Comm_rank(node_, &local_rank_);
    MPI_Comm_size(node_, &local_size_);
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    MPI_Get_processor_name(name, &length);
    host_.assign(name, static_cast<std::size_t>(length));
    library_ = library_version();
    watch_ = std::make_unique<RankWatch>(timeout, rank_, size_, host_);
  }
  ~MpiWorld() override {
    MPI_Comm_free(&node_);
    MPI_Finalize();
  }
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string host() const override { return host_; }
  bool launched() const override { return true; }
  std::string library() const override { return library_; }

  Status broadcast_bytes(void* data, std::size_t bytes, int root) override {
    if (bytes > static_cast<std::size_t>(INT_MAX))
      return Status::InvalidArgument("broadcast over 2 GiB");
    MPI_Request request;
    MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD, &request);
    wait(&request, "a broadcast");
    return Status::Ok();
  }

  std::vector<std::string> gather(const std::string& mine, int root) override {
    int length = static_cast<int>(mine.size());
    std::vector<int> lengths(rank_ == root ? size_ : 0);
    MPI_Request request;
    MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, MPI_COMM_WORLD, &request);
    wait(&request, "gathering results");
    std::vector<int> offsets(lengths.size());
    int total = 0;
    for (std::size_t i = 0; i < lengths.size(); ++i)
      offsets[i] = std::exchange(total, total + lengths[i]);
    std::string all(static_cast<std::size_t>(total), '\0');
    MPI_Igatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                 MPI_CHAR, root, MPI_COMM_WORLD, &request);
    wait(&request, "gathering results");
    std::vector<std::string> strings;
    for (std::size_t i = 0; i < lengths.size(); ++i)
      strings.push_back(all.substr(offsets[i], lengths[i]));
    return strings;
  }

  double max(double value) override { return reduce(value, MPI_MAX, "a maximum over the ranks"); }
  double sum(double value) override { return reduce(value, MPI_SUM, "a sum over the ranks"); }

  Status barrier() override {
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    wait(&request, "a barrier");
    return Status::Ok();
  }

  [[noreturn]] void abort(const std::string& reason, int exit_code) override {
    watch_->abort(reason, exit_code);
  }

  void set_activity(std::string activity) override { watch_->set_activity(std::move(activity)); }

  std::unique_ptr<Communicator> host_communicator() override {
    return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, library_, *watch_);
  }

 private:
  double reduce(double value, MPI_Op op, const char* what) {
    double result = value;
    MPI_Request request;
    MPI_Iallreduce(&value, &result, 1, MPI_DOUBLE, op, MPI_COMM_WORLD, &request);
    wait(&request, what);
    return result;
  }

  void wait(MPI_Request* request, const char* what) {
    watch_->wait(std::span<MPI_Request>(request, 1), what, /*spin=*/false);
  }

  std::unique_ptr<RankWatch> watch_;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  MPI_Comm node_ = MPI_COMM_NULL;
  std::string host_;
  std::string library_;
};

}  // namespace

std::unique_ptr<World> make_mpi_world(int* argc, char*** argv, std::chrono::seconds timeout) {
  return std::make_unique<MpiWorld>(argc, argv, timeout);
}

}  // namespace tb
