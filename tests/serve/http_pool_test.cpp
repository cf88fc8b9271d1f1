// HttpPool starts a thread for each task no waiting thread can take, up to its cap, and reuses
// the threads it has; the server answers a new connection while many idle keep-alive ones are open.
#include "serve/http_pool.h"

#include "test_server.h"

#include <atomic>
#include <future>

namespace weft::serve::test_support {
namespace {

// Tasks that block until released, counting how many run at once.
struct Blockers {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> running{0}, done{0};

  std::function<void()> task() {
    return [this] {
      ++running;
      released.wait();
      --running;
      ++done;
    };
  }
};

TEST(HttpPool, StartsAThreadForEachTaskBeyondTheWaitingOnes) {
  HttpPool pool(16);
  Blockers b;
  for (int i = 0; i < 6; ++i) pool.enqueue(b.task());
  ASSERT_TRUE(eventually([&] { return b.running == 6; })) << b.running << " of 6 tasks run at once";
  EXPECT_EQ(pool.threads(), 6);
  b.release.set_value();
  ASSERT_TRUE(eventually([&] { return b.done == 6; }));
  pool.shutdown();
}

TEST(HttpPool, ReusesThreadsThatFinished) {
  HttpPool pool(16);
  std::atomic<int> done{0};
  for (int i = 1; i <= 5; ++i) {
    pool.enqueue([&] { ++done; });
    ASSERT_TRUE(eventually([&] { return done == i; }));
  }
  // The first thread may not be waiting yet when the second task comes: at most two.
  EXPECT_LE(pool.threads(), 2);
}

TEST(HttpPool, QueuesBeyondItsCapUntilAThreadIsFree) {
  HttpPool pool(2);
  Blockers b;
  for (int i = 0; i < 5; ++i) pool.enqueue(b.task());
  ASSERT_TRUE(eventually([&] { return b.running == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(b.running, 2) << "no more than the cap at once";
  EXPECT_EQ(pool.threads(), 2);
  b.release.set_value();
  ASSERT_TRUE(eventually([&] { return b.done == 5; }));
}

TEST(HttpPool, ShutdownRunsTheQueuedTasksAndJoins) {
  std::atomic<int> done{0};
  {
    HttpPool pool(1);
    for (int i = 0; i < 4; ++i) pool.enqueue([&] { ++done; });
    pool.shutdown();
    EXPECT_EQ(done, 4);
    pool.enqueue([&] { ++done; });  // after shutdown: dropped
  }
  EXPECT_EQ(done, 4);
}

// Each keep-alive connection holds a server thread while idle (up to 5 s). With a fixed pool of
// slots + queue + 8 threads, the connection after them waited for one of those to time out.
TEST(HttpPool, ServerAnswersANewConnectionWhileManyIdleOnesAreOpen) {
  ServerOptions so;
  so.port = 0;
  so.slots = 1;
  so.max_queue = 1;
  Server server(so);
  server.start();
  std::vector<std::unique_ptr<httplib::Client>> idle;
  for (int i = 0; i < 24; ++i) {
    auto& c = *idle.emplace_back(std::make_unique<httplib::Client>("127.0.0.1", server.port()));
    c.set_keep_alive(true);
    c.set_read_timeout(2);
    ASSERT_EQ(get(c, "/health").status, 503) << "connection " << i;  // 503: no model loaded
  }
  httplib::Client fresh("127.0.0.1", server.port());
  fresh.set_read_timeout(2);  // well under the 5 s an idle connection holds its thread
  EXPECT_EQ(get(fresh, "/health").status, 503);
  idle.clear();  // closed: their threads stop waiting for a next request
  server.stop();
}

}  // namespace
}  // namespace weft::serve::test_support
