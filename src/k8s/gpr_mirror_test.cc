// GprMirror against the fake API server: list-then-watch of GPUProvisionRequest resources,
// status written through the status subresource, relist after 410 and after an outage.
#include "k8s/gpr_mirror.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "k8s/testing/fake_kube_api_server.h"

namespace egs::k8s {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

json Gpr(const std::string& ns, const std::string& name, int nodes) {
  return {{"apiVersion", "egs.dev/v1alpha1"},
          {"kind", "GPUProvisionRequest"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"shape", "h100x8"}, {"nodes", nodes}, {"duration", "1h"}}}};
}

class GprMirrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    server_.SetBookmarkInterval(50ms);
    KubeConfig config;
    config.server = server_.url();
    config.token = "secret";
    auto client = KubeClient::Create(clock_, config);
    ASSERT_TRUE(client.ok());
    GprMirrorCallbacks cb;
    cb.on_upsert = [this](const json& o) {
      Add("upsert " + o["metadata"]["namespace"].get<std::string>() + "/" +
          o["metadata"]["name"].get<std::string>() + " " +
          std::to_string(o["spec"]["nodes"].get<int>()));
    };
    cb.on_delete = [this](const std::string& ns, const std::string& name) {
      Add("delete " + ns + "/" + name);
    };
    mirror_ = std::make_unique<GprMirror>(clock_, std::move(*client),
                                          GprMirrorOptions{20ms, 100ms, 5s}, std::move(cb));
  }
  void Add(std::string s) {
    {
      std::lock_guard lock(mu_);
      seen_.push_back(std::move(s));
    }
    cv_.notify_all();
  }
  bool WaitForCount(std::size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 5s, [&] { return seen_.size() >= n; });
  }
  std::vector<std::string> Seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

  common::RealClock clock_;
  testing::FakeKubeApiServer server_{clock_, "secret"};
  std::unique_ptr<GprMirror> mirror_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> seen_;
};

TEST_F(GprMirrorTest, ListThenWatchReportsCreatesSpecChangesAndDeletes) {
  server_.Put(Gpr("team-a", "first", 1));
  mirror_->Start();
  ASSERT_TRUE(WaitForCount(1));
  // The list's items are reported before the mirror marks itself synced: wait for that too.
  for (int i = 0; i < 500 && !mirror_->IsSynced(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(mirror_->IsSynced());
  server_.Put(Gpr("team-a", "second", 2));
  ASSERT_TRUE(WaitForCount(2));
  // Our status write is a MODIFIED event with the same spec: not reported again.
  ASSERT_TRUE(mirror_->WriteStatus("team-a", "first", {{"phase", "Queued"}}).ok());
  EXPECT_EQ(server_.Get("GPUProvisionRequest", "team-a", "first")["status"]["phase"], "Queued");
  server_.Put(Gpr("team-a", "second", 3));  // a spec change is
  ASSERT_TRUE(WaitForCount(3));
  server_.Remove("GPUProvisionRequest", "team-a", "first");
  ASSERT_TRUE(WaitForCount(4));
  EXPECT_EQ(Seen(), (std::vector<std::string>{"upsert team-a/first 1", "upsert team-a/second 2",
                                              "upsert team-a/second 3", "delete team-a/first"}));
  EXPECT_EQ(mirror_->WriteStatus("team-a", "first", {{"phase", "Queued"}}).code(),
            common::StatusCode::kNotFound);
}

TEST_F(GprMirrorTest, RelistsAfterGoneAndAfterAnOutageWithoutRepeating) {
  server_.Put(Gpr("team-a", "kept", 1));
  server_.Put(Gpr("team-a", "dropped", 1));
  mirror_->Start();
  ASSERT_TRUE(WaitForCount(2));
  server_.CompactHistory();  // the watch gets 410: relist, nothing new to report
  server_.Put(Gpr("team-b", "later", 1));
  ASSERT_TRUE(WaitForCount(3));
  // Deleted while the cluster was unreachable: found missing at the relist.
  server_.SetReachable(false);
  server_.Remove("GPUProvisionRequest", "team-a", "dropped");
  server_.SetReachable(true);
  ASSERT_TRUE(WaitForCount(4));
  const std::vector<std::string> seen = Seen();
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen.back(), "delete team-a/dropped");
  EXPECT_EQ(std::count(seen.begin(), seen.end(), "upsert team-a/kept 1"), 1);
}

TEST(FakeStatusSubresourceTest, MainResourceKeepsStatusAndStatusChangesOnlyStatus) {
  common::RealClock clock;
  testing::FakeKubeApiServer server(clock, "");
  ASSERT_TRUE(server.Start().ok());
  server.Put({{"kind", "Namespace"}, {"metadata", {{"name", "team-a"}}}});
  KubeConfig config;
  config.server = server.url();
  auto client = KubeClient::Create(clock, config);
  ASSERT_TRUE(client.ok());
  const std::string path = "/apis/egs.dev/v1alpha1/namespaces/team-a/gpuprovisionrequests";
  json gpr = Gpr("team-a", "x", 1);
  gpr["status"] = {{"phase", "Active"}};
  auto created = (*client)->Post(path, gpr);
  ASSERT_TRUE(created.ok()) << created.error().ToString();
  EXPECT_FALSE(created->contains("status"));  // dropped on create
  auto s = (*client)->Patch(path + "/x/status",
                            {{"status", {{"phase", "Queued"}}}, {"spec", {{"nodes", 9}}}},
                            PatchType::kMerge);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)["status"]["phase"], "Queued");
  EXPECT_EQ((*s)["spec"]["nodes"], 1);  // /status changes only the status
  auto m =
      (*client)->Patch(path + "/x", {{"status", {{"phase", "Failed"}}}, {"spec", {{"nodes", 2}}}},
                       PatchType::kMerge);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)["status"]["phase"], "Queued");  // the main resource keeps the status
  EXPECT_EQ((*m)["spec"]["nodes"], 2);
  // A resource of the core group path is not found under egs.dev, and vice versa.
  EXPECT_EQ((*client)->Get("/api/v1/namespaces/team-a/gpuprovisionrequests").error().code(),
            common::StatusCode::kNotFound);
  EXPECT_EQ((*client)->Get("/apis/egs.dev/v1alpha1/nodes").error().code(),
            common::StatusCode::kNotFound);
}

}  // namespace
}  // namespace egs::k8s
