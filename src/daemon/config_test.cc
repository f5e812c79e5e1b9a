#include "daemon/config.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace egs::daemon {
namespace {

using egs::testing::StatusIs;

TEST(ConfigTest, FlagsOverrideTheConfigFile) {
  egs::testing::TempDir dir;
  const std::string path =
      dir.Write("egsd.yaml",
                "listen: 0.0.0.0:9000\n"
                "dataDir: /var/lib/egs\n"
                "logLevel: debug\n"
                "http: {threads: 16, maxWatches: 10}\n"
                "rateLimit: {perSecond: 5, burst: 10}\n"
                "tls: {certFile: /etc/egs/tls.crt, keyFile: /etc/egs/tls.key}\n"
                "scheduler: {fairShareAgeLimit: 6h30m, shadowDepth: 4, planThreads: 3}\n");
  auto c = ParseCommandLine({"--listen", "127.0.0.1:0", "--config", path, "--fleet=f.yaml"});
  ASSERT_OK(c);
  EXPECT_EQ(c->listen_host, "127.0.0.1");
  EXPECT_EQ(c->listen_port, 0);
  EXPECT_EQ(c->data_dir, "/var/lib/egs");
  EXPECT_EQ(c->fleet_file, "f.yaml");
  EXPECT_EQ(c->log_level, "debug");
  EXPECT_EQ(c->http_threads, 16);
  EXPECT_EQ(c->max_watches, 10);
  EXPECT_DOUBLE_EQ(c->rate_per_second, 5);
  EXPECT_EQ(c->tls_cert_file, "/etc/egs/tls.crt");
  EXPECT_EQ(c->tls_key_file, "/etc/egs/tls.key");
  EXPECT_EQ(c->fair_share_age_limit, common::Minutes(390));
  EXPECT_EQ(c->shadow_depth, 4);
  EXPECT_EQ(c->plan_threads, 3);
}

// A relative path in the config file names a file beside it, wherever egsd was started from; one
// in a flag stays relative to the working directory.
TEST(ConfigTest, RelativePathsInTheFileAreReadFromItsDirectory) {
  egs::testing::TempDir dir;
  const std::string path =
      dir.Write("egsd.yaml",
                "dataDir: state\n"
                "fleet: fleets/demo.yaml\n"
                "adminTokenFile: ../admin-token\n"
                "portalDir: /srv/portal\n"
                "tls: {certFile: tls/egsd.crt, keyFile: tls/egsd.key}\n"
                "kubernetes:\n"
                "  clusters:\n"
                "    - {name: east, project: research, kubeconfig: east.yaml,\n"
                "       shapes: [{gpuProduct: A100, gpuCount: 8, shape: a100}]}\n"
                "  webhook: {listen: 127.0.0.1:9443,\n"
                "            tls: {certFile: w.crt, keyFile: /etc/w.key}}\n");
  const std::filesystem::path base = std::filesystem::path(path).parent_path();
  auto c = ParseCommandLine({"--config", path});
  ASSERT_OK(c);
  EXPECT_EQ(c->data_dir, (base / "state").string());
  EXPECT_EQ(c->fleet_file, (base / "fleets/demo.yaml").string());
  EXPECT_EQ(c->admin_token_file, (base.parent_path() / "admin-token").string());
  EXPECT_EQ(c->portal_dir, "/srv/portal");
  EXPECT_EQ(c->tls_cert_file, (base / "tls/egsd.crt").string());
  EXPECT_EQ(c->tls_key_file, (base / "tls/egsd.key").string());
  ASSERT_EQ(c->kubernetes.clusters.size(), 1U);
  EXPECT_EQ(c->kubernetes.clusters[0].kubeconfig, (base / "east.yaml").string());
  EXPECT_EQ(c->kubernetes.webhook.tls_cert_file, (base / "w.crt").string());
  EXPECT_EQ(c->kubernetes.webhook.tls_key_file, "/etc/w.key");
  auto flags = ParseCommandLine({"--config", path, "--fleet", "mine.yaml", "--data-dir", "d"});
  ASSERT_OK(flags);
  EXPECT_EQ(flags->fleet_file, "mine.yaml");
  EXPECT_EQ(flags->data_dir, "d");
}

// Each watch holds a worker thread. Unless maxWatches is given, half the threads (at most 32) may
// hold one, so any thread count the flag accepts starts; a maxWatches given that leaves no thread
// for other requests is refused.
TEST(ConfigTest, WatchLimitFollowsTheThreadsUnlessGiven) {
  for (auto [threads, watches] : {std::pair{"1", 0}, {"10", 5}, {"64", 32}, {"256", 32}}) {
    auto c = ParseCommandLine({"--http-threads", threads});
    ASSERT_OK(c);
    EXPECT_EQ(c->max_watches, watches) << threads;
  }
  egs::testing::TempDir dir;
  const std::string path = dir.Write("egsd.yaml", "http: {threads: 8, maxWatches: 8}\n");
  auto c = ParseCommandLine({"--config", path});
  ASSERT_THAT(c, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(c.error().message(),
            "http.maxWatches: 8 must be below http.threads (8): each watch holds a worker thread");
}

TEST(ConfigTest, ConfigFlagTakesBothSpellings) {
  egs::testing::TempDir dir;
  const std::string path = dir.Write("egsd.yaml", "dataDir: /var/lib/egs\nlogLevel: debug\n");
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"--config", path}, {"--config=" + path}}) {
    auto c = ParseCommandLine(args);
    ASSERT_OK(c);
    EXPECT_EQ(c->data_dir, "/var/lib/egs") << args[0];
    EXPECT_EQ(c->log_level, "debug") << args[0];
  }
  // Flags still win over the file, whichever spelling named it.
  auto c = ParseCommandLine({"--log-level=warn", "--config=" + path});
  ASSERT_OK(c);
  EXPECT_EQ(c->log_level, "warn");
  EXPECT_THAT(ParseCommandLine({"--config="}), StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseCommandLine({"--config=/nonexistent/egsd.yaml"}),
              StatusIs(common::StatusCode::kInvalidArgument));
}

TEST(ConfigTest, DatabaseFromTheFileOrTheFlag) {
  egs::testing::TempDir dir;
  const std::string path =
      dir.Write("egsd.yaml", "database: postgresql://egs@db.example:5432/egs?sslmode=require\n");
  auto c = ParseCommandLine({"--config", path});
  ASSERT_OK(c);
  EXPECT_EQ(c->database, "postgresql://egs@db.example:5432/egs?sslmode=require");
  c = ParseCommandLine({"--config", path, "--database", "host=10.0.0.7 dbname=egs user=egs"});
  ASSERT_OK(c);
  EXPECT_EQ(c->database, "host=10.0.0.7 dbname=egs user=egs");
  c = ParseCommandLine({});
  ASSERT_OK(c);
  EXPECT_EQ(c->database, "");  // SQLite in the data directory
  EXPECT_FALSE(c->standby);
  c = ParseCommandLine({"--config", path, "--standby"});
  ASSERT_OK(c);
  EXPECT_TRUE(c->standby);
  c = ParseCommandLine({"--config", dir.Write("s.yaml", "database: host=db\nstandby: true\n")});
  ASSERT_OK(c);
  EXPECT_TRUE(c->standby);
  EXPECT_THAT(ParseCommandLine({"--config", dir.Write("t.yaml", "standby: maybe\n")}),
              StatusIs(common::StatusCode::kInvalidArgument));
  // How long a store that does not answer is waited for: defaults, then from the file.
  EXPECT_EQ(c->commit_retry_for, common::Seconds(15));
  EXPECT_EQ(c->start_wait, common::Seconds(60));
  c = ParseCommandLine(
      {"--config", dir.Write("u.yaml", "store: {commitRetryFor: 30s, startWait: 0s}\n")});
  ASSERT_OK(c);
  EXPECT_EQ(c->commit_retry_for, common::Seconds(30));
  EXPECT_EQ(c->start_wait, common::Duration(0));
}

TEST(ConfigTest, ALeadingDocumentMarkerIsOneDocument) {
  egs::testing::TempDir dir;
  auto c = ParseCommandLine({"--config", dir.Write("a.yaml", "---\nlogLevel: warn\n")});
  ASSERT_OK(c);
  EXPECT_EQ(c->log_level, "warn");
  ASSERT_OK(ParseCommandLine({"--config", dir.Write("empty.yaml", "")}));
}

TEST(ConfigTest, BadInputNamesTheFieldOrFlag) {
  auto expect_error = [](std::vector<std::string> args, const std::string& needle) {
    auto c = ParseCommandLine(args);
    ASSERT_THAT(c, StatusIs(common::StatusCode::kInvalidArgument));
    EXPECT_NE(c.error().message().find(needle), std::string::npos) << c.error().message();
  };
  expect_error({"--listen", "8080"}, "--listen");
  expect_error({"--listen", "h:99999"}, "--listen");
  expect_error({"--bogus"}, "--bogus");
  expect_error({"--data-dir"}, "--data-dir");
  expect_error({"--log-level", "loud"}, "--log-level");
  expect_error({"--http-threads", "0"}, "--http-threads");
  expect_error({"--config", "/nonexistent/egsd.yaml"}, "--config");
  expect_error({"--tls-cert-file", "c.pem"}, "--tls-key-file");
  expect_error({"--fleet", ""}, "--fleet: empty");
  expect_error({"--fleet="}, "--fleet: empty");
  expect_error({"--database", ""}, "--database: empty");
  expect_error({"--database", "postgresql://egs@[::1/egs"},
               "--database: not a PostgreSQL connection string or URI");
  expect_error({"--database", "host=db nosuchkey=1"}, "--database: not a PostgreSQL");
  expect_error({"--standby"}, "--standby: needs --database");
  expect_error({"--standby=yes", "--database", "host=db"}, "--standby: takes no value");

  egs::testing::TempDir dir;
  expect_error({"--config", dir.Write("a.yaml", "listen: [1, 2]\n")}, "listen");
  expect_error({"--config", dir.Write("db.yaml", "database: 'port'\n")},
               "db.yaml:1:1: database: not a PostgreSQL connection string or URI");
  // Errors in nested sections give the line and column of the field, the alerts section's too.
  expect_error({"--config", dir.Write("n.yaml", "logLevel: warn\nhttp:\n  threads: 0\n")},
               "n.yaml:3:3: http.threads: must be an integer in [1, 256]");
  expect_error({"--config", dir.Write("o.yaml",
                                      "logLevel: warn\n\nalerts:\n  rules:\n    "
                                      "temperature: {raiseAbove: hot}\n")},
               "o.yaml:5:19: alerts.rules.temperature.raiseAbove: \"hot\" is not a number");
  expect_error({"--config", dir.Write("p.yaml",
                                      "kubernetes:\n  clusters:\n  - name: a\n    "
                                      "retries: 3\n")},
               "p.yaml:4:5: kubernetes.clusters[0].retries: unknown key");
  expect_error({"--config", dir.Write("b.yaml", "colour: red\n")}, "colour: unknown key");
  expect_error({"--config", dir.Write("c.yaml", "http: {threads: many}\n")}, "http.threads");
  expect_error({"--config", dir.Write("d.yaml", "listen: [\n")}, "d.yaml:");
  expect_error({"--config", dir.Write("e.yaml", "tls: {cert: x}\n")}, "tls.cert: unknown key");
  expect_error({"--config", dir.Write("f.yaml", "scheduler: {fairShareAgeLimit: soon}\n")},
               "scheduler.fairShareAgeLimit");
  expect_error({"--config", dir.Write("g.yaml", "scheduler: {fairShareAgeLimit: 0s}\n")},
               "scheduler.fairShareAgeLimit: must be a positive duration");
  expect_error({"--config", dir.Write("h2.yaml", "scheduler: {shadowDepth: 0}\n")},
               "scheduler.shadowDepth");
  expect_error({"--config", dir.Write("h3.yaml", "scheduler: {shadowDepth: deep}\n")},
               "scheduler.shadowDepth");
  expect_error({"--config", dir.Write("h4.yaml", "scheduler: {planThreads: 65}\n")},
               "scheduler.planThreads");
  expect_error({"--config", dir.Write("h5.yaml", "scheduler: {planThreads: -1}\n")},
               "scheduler.planThreads");
  expect_error({"--config", dir.Write("h.yaml", "scheduler: {ageLimit: 1h}\n")},
               "scheduler.ageLimit: unknown key");
  expect_error({"--config", dir.Write("i.yaml", "store: {commitRetryFor: -1s}\n")},
               "store.commitRetryFor");
  expect_error({"--config", dir.Write("j.yaml", "store: {startWait: 2h}\n")},
               "store.startWait: must be between 0s and 1h");
  expect_error({"--config", dir.Write("k.yaml", "store: {retries: 3}\n")},
               "store.retries: unknown key");
  expect_error({"--config", dir.Write("l.yaml", "store: 15s\n")}, "store: must be a mapping");
  // A directory read as an empty config; inf and huge rates were taken.
  expect_error({"--config", dir.path().string()},
               "--config: " + dir.path().string() + " is a directory");
  expect_error({"--config=" + dir.path().string()}, "is a directory");
  expect_error({"--config", dir.Write("i.yaml", "rateLimit: {perSecond: inf}\n")},
               "rateLimit.perSecond: must be a number > 0 and <= 1000000, got \"inf\"");
  expect_error({"--config", dir.Write("j.yaml", "rateLimit: {burst: 1e300}\n")},
               "rateLimit.burst: must be a number > 0 and <= 1000000");
  expect_error({"--config", dir.Write("k.yaml", "rateLimit: {perSecond: nan}\n")},
               "rateLimit.perSecond");
  // A repeated key (the last one won) and a second document (ignored).
  const std::string dup = dir.Write("l.yaml", "listen: 127.0.0.1:1\nlogLevel: warn\nlisten: :2\n");
  expect_error({"--config", dup}, dup + ":3:1: listen: duplicate key (first at line 1)");
  expect_error({"--config", dir.Write("m.yaml", "http:\n  threads: 8\n  threads: 9\n")},
               "m.yaml:3:3: http.threads: duplicate key (first at line 2)");
  expect_error({"--config", dir.Write("n.yaml",
                                      "kubernetes:\n  clusters:\n    - {name: a, "
                                      "name: b}\n")},
               "kubernetes.clusters[0].name: duplicate key");
  const std::string two = dir.Write("o.yaml", "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n");
  expect_error({"--config", two}, two +
                                      ":3: a second YAML document (\"---\"): a config file "
                                      "holds one");
  expect_error({"--config", dir.Write("p.yaml", "a: &x [*x]\n")}, "nested deeper than 64");
  // yaml-cpp's LoadAll never returned on a lone "," (found by fuzz/yaml_config_fuzz.cc).
  const std::string comma = dir.Write("q.yaml", ",");
  expect_error({"--config", comma}, comma + ":1:1: ");
}

}  // namespace
}  // namespace egs::daemon
