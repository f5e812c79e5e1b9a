#include "api/static_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace egs::api {
namespace {

using ::egs::testing::StatusIs;
using ::testing::HasSubstr;

HttpRequest Get(std::string path, std::string method = "GET") {
  HttpRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  return r;
}

class StaticFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.path() / "portal" / "assets");
    dir_.Write("portal/index.html", "<html>portal</html>");
    dir_.Write("portal/assets/app.js", "console.log(1)");
    dir_.Write("secret.txt", "outside");
    auto files = StaticFiles::Open(dir_.path() / "portal", "/portal");
    ASSERT_TRUE(files.ok()) << files.error().ToString();
    files_.emplace(std::move(*files));
  }

  egs::testing::TempDir dir_;
  std::optional<StaticFiles> files_;
};

TEST_F(StaticFilesTest, ServesFilesIndexAndClientRoutes) {
  auto index = files_->Serve(Get("/portal"));
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(index->body, "<html>portal</html>");
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(files_->Serve(Get("/portal/"))->body, "<html>portal</html>");

  auto js = files_->Serve(Get("/portal/assets/app.js"));
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->body, "console.log(1)");
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");

  // A client-side route is the app; a missing asset is 404.
  EXPECT_EQ(files_->Serve(Get("/portal/requests/team-a/train"))->body, "<html>portal</html>");
  EXPECT_EQ(files_->Serve(Get("/portal/assets/missing.js"))->status, 404);
  // HEAD: headers only.
  auto head = files_->Serve(Get("/portal/assets/app.js", "HEAD"));
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
}

TEST_F(StaticFilesTest, OtherPathsAreNotServed) {
  EXPECT_FALSE(files_->Serve(Get("/apis/egs.dev/v1alpha1/nodes")));
  EXPECT_FALSE(files_->Serve(Get("/portalx")));
  EXPECT_FALSE(files_->Serve(Get("/")));
  EXPECT_EQ(files_->Serve(Get("/portal/index.html", "POST"))->status, 405);
}

TEST_F(StaticFilesTest, NeverLeavesTheDirectory) {
  EXPECT_EQ(files_->Serve(Get("/portal/../secret.txt"))->status, 400);
  EXPECT_EQ(files_->Serve(Get("/portal/assets/../../secret.txt"))->status, 400);
  EXPECT_EQ(files_->Serve(Get("/portal/./index.html"))->status, 400);
  EXPECT_EQ(files_->Serve(Get("/portal/a//b.js"))->status, 400);
  EXPECT_EQ(files_->Serve(Get("/portal/..\\secret.txt"))->status, 400);
  // A symbolic link out of the directory is not followed.
  std::filesystem::create_symlink(dir_.path() / "secret.txt", dir_.path() / "portal" / "leak.txt");
  auto leak = files_->Serve(Get("/portal/leak.txt"));
  EXPECT_EQ(leak->status, 404);
  EXPECT_THAT(leak->body, ::testing::Not(HasSubstr("outside")));
}

TEST(StaticFilesOpenTest, BadDirectoriesAreInvalidArgument) {
  egs::testing::TempDir dir;
  EXPECT_THAT(StaticFiles::Open(dir.path() / "nope", "/portal"),
              StatusIs(common::StatusCode::kInvalidArgument));
  auto no_index = StaticFiles::Open(dir.path(), "/portal");
  EXPECT_THAT(no_index, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(no_index.error().message(), HasSubstr("index.html"));
  dir.Write("index.html", "x");
  EXPECT_THAT(StaticFiles::Open(dir.path(), "portal"),
              StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(StaticFiles::Open(dir.path(), "/portal/"),
              StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_TRUE(StaticFiles::Open(dir.path(), "/portal").ok());
}

}  // namespace
}  // namespace egs::api
